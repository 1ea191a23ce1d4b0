// Subgraph extraction runs unchanged on a live snapshot: the same facts ingested through
// the store in chunks and loaded into a StaticGraph give identical enclosing subgraphs,
// before and after reopening the store.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "model/grail/enclosing_subgraph.h"
#include "store/triple_store.h"
#include "tests/testing/subgraph_expectations.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

// A graph with hubs (so 3-hop neighbourhoods are large), repeated facts and 6 relations.
std::vector<NamedTriple> HubbyGraph(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<NamedTriple> facts;
  auto entity = [&] { return absl::StrCat("n", rng() % 4 == 0 ? rng() % 20 : rng() % 1500); };
  for (int i = 0; i < 6000; ++i) {
    facts.push_back({entity(), absl::StrCat("r", rng() % 6), entity()});
    if (rng() % 20 == 0) facts.push_back(facts[rng() % facts.size()]);
  }
  return facts;
}

// Extracts the same queries from both graphs under several configurations; returns the
// number of non-trivial subgraphs compared (so the test can insist that some were).
int CompareExtractions(const GraphView& live, const GraphView& reference,
                       const std::vector<Triple>& queries) {
  int nontrivial = 0;
  for (const ExtractionConfig& config :
       {ExtractionConfig{3, 0, true}, ExtractionConfig{2, 0, true}, ExtractionConfig{3, 20, true},
        ExtractionConfig{2, 0, false}}) {
    SubgraphExtractor on_live(config), on_reference(config);
    EnclosingSubgraph from_live, from_reference;
    for (const Triple& q : queries) {
      for (bool hide : {false, true}) {
        absl::Status a = on_live.Extract(live, q.head, q.relation, q.tail, hide, &from_live);
        absl::Status b =
            on_reference.Extract(reference, q.head, q.relation, q.tail, hide, &from_reference);
        EXPECT_EQ(a.code(), b.code());
        if (!a.ok()) continue;
        ExpectSameSubgraph(from_live, from_reference);
        if (from_live.num_nodes() > 2) ++nontrivial;
      }
    }
  }
  return nontrivial;
}

TEST(SnapshotExtractionTest, ExtractionOnASnapshotMatchesAStaticGraphOfTheSameFacts) {
  const std::vector<NamedTriple> named = HubbyGraph(11);
  IndexedTriples indexed;
  IndexTriples(named, &indexed);
  const StaticGraph reference(indexed.entities.size(), indexed.triples);

  // Queries: stored facts (target in the graph) and random pairs (ranking candidates).
  std::mt19937_64 rng(5);
  std::vector<Triple> queries;
  for (int i = 0; i < 60; ++i) {
    queries.push_back(indexed.triples[rng() % indexed.triples.size()]);
    queries.push_back({static_cast<EntityId>(rng() % reference.num_entities()),
                       static_cast<RelationId>(rng() % reference.num_relations()),
                       static_cast<EntityId>(rng() % reference.num_entities())});
  }

  ScopedTempDir temp;
  {
    absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(temp.Sub("s"), {});
    ASSERT_TRUE(store.ok()) << store.status();
    for (size_t begin = 0; begin < named.size(); begin += 500) {
      const size_t size = std::min<size_t>(500, named.size() - begin);
      ASSERT_TRUE((*store)->AddChunk(absl::MakeConstSpan(named).subspan(begin, size)).ok());
    }
    auto snapshot = (*store)->Snapshot();
    // Same ids by construction (first appearance), so the queries mean the same facts.
    ASSERT_EQ(snapshot->num_entities(), reference.num_entities());
    ASSERT_EQ(snapshot->num_facts(), reference.num_facts());
    EXPECT_GT(CompareExtractions(*snapshot, reference, queries), 100);
  }
  absl::StatusOr<std::unique_ptr<TripleStore>> reopened = TripleStore::Open(temp.Sub("s"), {});
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  EXPECT_GT(CompareExtractions(*(*reopened)->Snapshot(), reference, queries), 100);
}

}  // namespace
}  // namespace grail
