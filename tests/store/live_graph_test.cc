// The in-memory index on its own (no RocksDB): the versioned adjacency index, the shared
// name table and the versions LiveGraph publishes.
#include "store/live_graph.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/algorithm/container.h"
#include "gmock/gmock.h"
#include "graph/relation_sides.h"
#include "graph/static_graph.h"
#include "gtest/gtest.h"
#include "store/adjacency_index.h"
#include "store/name_table.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::vector<Neighbor> Copy(absl::Span<const Neighbor> span) { return {span.begin(), span.end()}; }

// Random facts over `num_entities` entities, with repeats, a few hubs and self-loops.
std::vector<Triple> RandomFacts(uint32_t num_entities, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Triple> facts;
  for (size_t i = 0; i < count; ++i) {
    // One end in three is one of 8 hubs, so some entities have large lists.
    auto entity = [&]() -> EntityId {
      return rng() % 3 == 0 ? static_cast<EntityId>(rng() % 8)
                            : static_cast<EntityId>(rng() % num_entities);
    };
    facts.push_back({entity(), static_cast<RelationId>(rng() % 5), entity()});
    if (rng() % 10 == 0) facts.push_back(facts[rng() % facts.size()]);
  }
  return facts;
}

void ExpectSameAdjacency(const AdjacencyIndex::Version& version, const StaticGraph& expected) {
  for (EntityId e = 0; e < expected.num_entities(); ++e) {
    ASSERT_EQ(Copy(version.OutEdges(e)), Copy(expected.OutEdges(e))) << "out-edges of " << e;
    ASSERT_EQ(Copy(version.InEdges(e)), Copy(expected.InEdges(e))) << "in-edges of " << e;
  }
}

// Applies `facts` as additions; returns the new version.
AdjacencyIndex::Version Add(AdjacencyIndex& index, const std::vector<Triple>& facts,
                            uint64_t* added = nullptr) {
  return index.Apply(facts, {}, added, nullptr);
}

TEST(AdjacencyIndexTest, EmptyIndexHasNoEdgesForAnyId) {
  AdjacencyIndex index;
  for (const AdjacencyIndex::Version& version : {index.Latest(), AdjacencyIndex::Version()}) {
    for (EntityId e : {0u, 31u, 32u, 100000u, 0xfffffffeu, 0xffffffffu}) {
      EXPECT_THAT(version.OutEdges(e), IsEmpty());
      EXPECT_THAT(version.InEdges(e), IsEmpty());
    }
  }
}

TEST(AdjacencyIndexTest, ApplySortsEdgesAndIgnoresKnownFacts) {
  AdjacencyIndex index;
  uint64_t added = 0;
  AdjacencyIndex::Version v =
      Add(index, {{0, 1, 2}, {0, 0, 2}, {0, 0, 1}, {0, 0, 2}, {3, 0, 2}}, &added);
  EXPECT_EQ(added, 4u);
  EXPECT_THAT(v.OutEdges(0), ElementsAre(Neighbor{1, 0}, Neighbor{2, 0}, Neighbor{2, 1}));
  EXPECT_THAT(v.InEdges(2), ElementsAre(Neighbor{0, 0}, Neighbor{0, 1}, Neighbor{3, 0}));

  // One known fact, one new one, both directions of the new one updated.
  v = Add(index, {{0, 0, 1}, {2, 0, 0}}, &added);
  EXPECT_EQ(added, 1u);
  EXPECT_THAT(v.OutEdges(2), ElementsAre(Neighbor{0, 0}));
  EXPECT_THAT(v.InEdges(0), ElementsAre(Neighbor{2, 0}));
  EXPECT_THAT(v.OutEdges(0), ElementsAre(Neighbor{1, 0}, Neighbor{2, 0}, Neighbor{2, 1}));
}

TEST(AdjacencyIndexTest, SelfLoopAppearsInBothDirectionsOfItsEntity) {
  AdjacencyIndex index;
  uint64_t added = 0;
  const AdjacencyIndex::Version v = Add(index, {{5, 2, 5}}, &added);
  EXPECT_EQ(added, 1u);
  EXPECT_THAT(v.OutEdges(5), ElementsAre(Neighbor{5, 2}));
  EXPECT_THAT(v.InEdges(5), ElementsAre(Neighbor{5, 2}));
}

TEST(AdjacencyIndexTest, OlderVersionIsUnchangedByLaterChanges) {
  AdjacencyIndex index;
  const AdjacencyIndex::Version v1 = Add(index, {{0, 0, 1}, {3, 0, 0}});
  const absl::Span<const Neighbor> v1_out = v1.OutEdges(0);
  const AdjacencyIndex::Version v2 = Add(index, {{0, 1, 1}, {0, 0, 2}, {40000, 0, 0}});
  uint64_t removed = 0;
  const AdjacencyIndex::Version v3 = index.Apply(
      std::vector<Triple>{{7, 0, 0}}, std::vector<Triple>{{0, 0, 1}, {3, 0, 0}}, nullptr, &removed);
  EXPECT_EQ(removed, 2u);
  // v1's span still points at v1's list, which still holds what it held.
  EXPECT_THAT(v1_out, ElementsAre(Neighbor{1, 0}));
  EXPECT_THAT(v1.OutEdges(0), ElementsAre(Neighbor{1, 0}));
  EXPECT_THAT(v1.InEdges(0), ElementsAre(Neighbor{3, 0}));
  EXPECT_THAT(v1.OutEdges(40000), IsEmpty());
  EXPECT_THAT(v2.OutEdges(0), ElementsAre(Neighbor{1, 0}, Neighbor{1, 1}, Neighbor{2, 0}));
  EXPECT_THAT(v2.InEdges(0), ElementsAre(Neighbor{3, 0}, Neighbor{40000, 0}));
  EXPECT_THAT(v3.OutEdges(0), ElementsAre(Neighbor{1, 1}, Neighbor{2, 0}));
  EXPECT_THAT(v3.InEdges(0), ElementsAre(Neighbor{7, 0}, Neighbor{40000, 0}));
  EXPECT_THAT(v3.OutEdges(3), IsEmpty());
  EXPECT_THAT(v2.OutEdges(3), ElementsAre(Neighbor{0, 0}));
}

TEST(AdjacencyIndexTest, EveryHeldVersionMatchesItsFactsAfterManyBatches) {
  // Batches add facts in random id order across several of the slot array's segments; a
  // version from each quarter must still match the graph of the facts up to it.
  constexpr uint32_t kEntities = 140000;
  const std::vector<Triple> facts = RandomFacts(kEntities, 60000, 7);
  AdjacencyIndex index;
  std::vector<std::pair<AdjacencyIndex::Version, size_t>> held;
  constexpr size_t kBatch = 997;
  for (size_t begin = 0; begin < facts.size(); begin += kBatch) {
    const size_t end = std::min(facts.size(), begin + kBatch);
    const AdjacencyIndex::Version v =
        index.Apply(absl::MakeConstSpan(facts).subspan(begin, end - begin), {}, nullptr, nullptr);
    if (held.size() * facts.size() / 4 <= end) held.emplace_back(v, end);
  }
  ASSERT_GE(held.size(), 4u);
  for (const auto& [version, count] : held) {
    ExpectSameAdjacency(version, StaticGraph(kEntities, absl::MakeConstSpan(facts).first(count)));
  }
  ExpectSameAdjacency(index.Latest(), StaticGraph(kEntities, facts));
}

TEST(AdjacencyIndexTest, RemovalsTakeBothDirectionsAndMatchTheRemainingFacts) {
  // Add random facts, then remove a random half of them in batches that also add facts back:
  // the index must equal the graph of the facts that are left, and the version before the
  // removals must still equal the graph of them all.
  constexpr uint32_t kEntities = 5000;
  std::vector<Triple> facts = RandomFacts(kEntities, 20000, 11);
  AdjacencyIndex index;
  const AdjacencyIndex::Version full = Add(index, facts);
  std::sort(facts.begin(), facts.end());
  facts.erase(std::unique(facts.begin(), facts.end()), facts.end());
  std::mt19937_64 rng(12);
  std::vector<Triple> removed, kept;
  for (const Triple& t : facts) (rng() % 2 == 0 ? removed : kept).push_back(t);
  // Repeats and facts the index never held are ignored.
  std::vector<Triple> request = removed;
  request.push_back(removed.front());
  request.push_back(Triple{kEntities + 7, 0, 1});
  std::shuffle(request.begin(), request.end(), rng);

  uint64_t total_removed = 0, total_added = 0;
  constexpr size_t kBatch = 613;
  for (size_t begin = 0; begin < request.size(); begin += kBatch) {
    uint64_t removed_count = 0, added_count = 0;
    const size_t end = std::min(request.size(), begin + kBatch);
    // Each batch also adds back one kept fact (ignored) and removes what it adds.
    const std::vector<Triple> adds = {kept[begin % kept.size()], request[begin]};
    index.Apply(adds, absl::MakeConstSpan(request).subspan(begin, end - begin), &added_count,
                &removed_count);
    total_removed += removed_count;
    total_added += added_count;
  }
  EXPECT_EQ(total_added, 0u);
  EXPECT_EQ(total_removed, removed.size());
  ExpectSameAdjacency(index.Latest(), StaticGraph(kEntities, kept));
  ExpectSameAdjacency(full, StaticGraph(kEntities, facts));
}

TEST(AdjacencyIndexTest, LargestIdsAreStoredAndFound) {
  const EntityId top = 0xfffffffeu;
  AdjacencyIndex index;
  const AdjacencyIndex::Version v = Add(index, {{top, 0, 1}, {1, 0, top - 33}});
  EXPECT_THAT(v.OutEdges(top), ElementsAre(Neighbor{1, 0}));
  EXPECT_THAT(v.InEdges(top - 33), ElementsAre(Neighbor{1, 0}));
  EXPECT_THAT(v.InEdges(1), ElementsAre(Neighbor{top, 0}));
  EXPECT_THAT(v.OutEdges(top - 1), IsEmpty());
}

TEST(AdjacencyIndexTest, AReplacedListIsKeptWhileAnEarlierVersionIsHeldAndFreedAfter) {
  AdjacencyIndex index;
  std::optional<AdjacencyIndex::Version> v1 = Add(index, {{0, 0, 1}, {2, 0, 3}});
  // Nothing holds the versions in between: what they replace goes at once.
  for (EntityId i = 0; i < 3; ++i) Add(index, {{4, 0, 5 + i}});
  ASSERT_GT(index.ApproximateMemoryUsage().retained, 0u);  // v1 holds entity 4's lists
  std::optional<AdjacencyIndex::Version> v5 = Add(index, {{0, 0, 2}});
  v1.reset();
  // No version before 5 is held: the lists version 5 replaced go, and v5 reads its own.
  EXPECT_EQ(index.ApproximateMemoryUsage().retained, 0u);
  EXPECT_THAT(v5->OutEdges(0), ElementsAre(Neighbor{1, 0}, Neighbor{2, 0}));
  const AdjacencyIndex::Version v6 = Add(index, {{0, 0, 3}});
  EXPECT_GT(index.ApproximateMemoryUsage().retained, 0u);  // v5 reads entity 0's old list
  EXPECT_THAT(v5->OutEdges(0), ElementsAre(Neighbor{1, 0}, Neighbor{2, 0}));
  v5.reset();
  EXPECT_EQ(index.ApproximateMemoryUsage().retained, 0u);
  EXPECT_THAT(v6.OutEdges(0), ElementsAre(Neighbor{1, 0}, Neighbor{2, 0}, Neighbor{3, 0}));
}

TEST(AdjacencyIndexTest, AnAbortedVersionLeavesTheLatestAsItWasAndTheNextBuildsOnIt) {
  AdjacencyIndex index;
  const AdjacencyIndex::Version v1 = Add(index, {{0, 0, 1}, {2, 0, 0}});
  AdjacencyIndex::Prepared prepared =
      index.Prepare(std::vector<Triple>{{0, 1, 1}, {0, 0, 70000}}, std::vector<Triple>{{2, 0, 0}});
  EXPECT_EQ(prepared.added(), 2u);
  EXPECT_EQ(prepared.removed(), 1u);
  // Built but not published: the latest version reads as before.
  EXPECT_THAT(index.Latest().OutEdges(0), ElementsAre(Neighbor{1, 0}));
  index.Abort(std::move(prepared));
  for (const AdjacencyIndex::Version& v : {v1, index.Latest()}) {
    EXPECT_THAT(v.OutEdges(0), ElementsAre(Neighbor{1, 0}));
    EXPECT_THAT(v.InEdges(0), ElementsAre(Neighbor{2, 0}));
    EXPECT_THAT(v.InEdges(70000), IsEmpty());
  }
  uint64_t added = 0;
  const AdjacencyIndex::Version v2 = Add(index, {{0, 0, 3}}, &added);
  EXPECT_EQ(added, 1u);
  EXPECT_THAT(v2.OutEdges(0), ElementsAre(Neighbor{1, 0}, Neighbor{3, 0}));
  EXPECT_THAT(v2.InEdges(0), ElementsAre(Neighbor{2, 0}));
  EXPECT_THAT(v2.InEdges(70000), IsEmpty());
  EXPECT_THAT(v1.OutEdges(0), ElementsAre(Neighbor{1, 0}));
}

TEST(AdjacencyIndexTest, ReadersOfHeldVersionsSeeTheirFactsWhileTheWriterApplies) {
  // Readers on two threads take the latest version now and then, hold it across later
  // batches (additions and removals) and check it against the facts of its version; the
  // writer frees what no held version reads. Meant for TSan and ASan as much as for its
  // assertions.
  constexpr uint32_t kEntities = 3000;
  const std::vector<Triple> facts = RandomFacts(kEntities, 30000, 21);
  constexpr size_t kBatch = 500;
  const size_t batches = facts.size() / kBatch;
  // Batch b adds facts [b * kBatch, (b + 1) * kBatch) and removes batch b - 2's facts.
  auto facts_of = [&](size_t b) {
    std::vector<Triple> now(facts.begin() + (b >= 1 ? (b - 1) * kBatch : 0),
                            facts.begin() + (b + 1) * kBatch);
    return StaticGraph(kEntities, now);
  };
  AdjacencyIndex index;
  std::mutex mu;
  std::optional<std::pair<AdjacencyIndex::Version, size_t>> published;
  std::atomic<bool> done{false};
  std::atomic<int> checked{0};
  auto reader = [&] {
    while (!done.load()) {
      std::optional<std::pair<AdjacencyIndex::Version, size_t>> mine;
      {
        std::lock_guard<std::mutex> lock(mu);
        mine = published;
      }
      if (!mine.has_value()) continue;
      const StaticGraph expected = facts_of(mine->second);
      std::this_thread::yield();  // let batches go by while the version is held
      ExpectSameAdjacency(mine->first, expected);
      ++checked;
    }
  };
  std::thread a(reader), b(reader);
  for (size_t batch = 0; batch < batches; ++batch) {
    const auto added = absl::MakeConstSpan(facts).subspan(batch * kBatch, kBatch);
    std::vector<Triple> removed;
    if (batch >= 2) {
      // Batch b - 2's facts, less those a later batch added again.
      const std::set<Triple> later(facts.begin() + (batch - 1) * kBatch,
                                   facts.begin() + (batch + 1) * kBatch);
      for (size_t i = (batch - 2) * kBatch; i < (batch - 1) * kBatch; ++i) {
        if (later.count(facts[i]) == 0) removed.push_back(facts[i]);
      }
    }
    const AdjacencyIndex::Version v = index.Apply(added, removed, nullptr, nullptr);
    std::lock_guard<std::mutex> lock(mu);
    published.emplace(v, batch);
  }
  while (checked.load() < 20) std::this_thread::yield();
  done = true;
  a.join();
  b.join();
  {
    std::lock_guard<std::mutex> lock(mu);
    published.reset();
  }
  EXPECT_EQ(index.ApproximateMemoryUsage().retained, 0u);
  ExpectSameAdjacency(index.Latest(), facts_of(batches - 1));
}

TEST(NameTableTest, NamesGetDenseIdsAndStayAtTheirAddressAcrossSegments) {
  NameTable table;
  table.Append("first");
  const std::string* first = &table.Name(0);
  // Enough names to fill the first two segments (1024 + 2048) and start a third.
  for (int i = 1; i < 5000; ++i) table.Append("name-" + std::to_string(i));
  EXPECT_EQ(table.size(), 5000u);
  EXPECT_EQ(&table.Name(0), first);
  EXPECT_EQ(*first, "first");
  for (uint32_t id : {1u, 1023u, 1024u, 3071u, 3072u, 4999u}) {
    EXPECT_EQ(table.Name(id), "name-" + std::to_string(id));
    EXPECT_EQ(table.Find("name-" + std::to_string(id)), id);
  }
  EXPECT_EQ(table.Find("first"), 0u);
  EXPECT_EQ(table.Find("name-5000"), std::nullopt);
}

// A delta that creates the named entities and relations and adds the facts.
GraphDelta Delta(std::vector<std::string> entities, std::vector<std::string> relations,
                 std::vector<Triple> facts, uint64_t sequence) {
  GraphDelta delta;
  delta.new_entities = std::move(entities);
  delta.new_relations = std::move(relations);
  delta.facts = std::move(facts);
  delta.sequence = sequence;
  return delta;
}

TEST(LiveGraphTest, NewGraphIsEmptyAtSequenceZero) {
  LiveGraph graph;
  auto snapshot = graph.Snapshot();
  EXPECT_EQ(snapshot->num_entities(), 0u);
  EXPECT_EQ(snapshot->num_relations(), 0u);
  EXPECT_EQ(snapshot->num_facts(), 0u);
  EXPECT_EQ(snapshot->sequence(), 0u);
  EXPECT_EQ(snapshot->FindEntity("anything"), std::nullopt);
  EXPECT_THAT(snapshot->relation_names(), IsEmpty());
}

TEST(LiveGraphTest, SnapshotHidesEntitiesAndRelationsCreatedAfterIt) {
  LiveGraph graph;
  graph.Apply(Delta({"a", "b"}, {"likes"}, {{0, 0, 1}}, 1));
  auto before = graph.Snapshot();
  graph.Apply(Delta({"c"}, {"hates"}, {{2, 1, 0}}, 2));
  auto after = graph.Snapshot();

  EXPECT_EQ(before->num_entities(), 2u);
  EXPECT_EQ(before->FindEntity("c"), std::nullopt);
  EXPECT_EQ(before->FindRelation("hates"), std::nullopt);
  EXPECT_THAT(before->relation_names(), ElementsAre("likes"));
  EXPECT_EQ(before->FindEntity("a"), 0u);

  EXPECT_EQ(after->num_entities(), 3u);
  EXPECT_EQ(after->FindEntity("c"), 2u);
  EXPECT_EQ(after->EntityName(2), "c");
  EXPECT_EQ(after->FindRelation("hates"), 1u);
  EXPECT_EQ(after->RelationName(1), "hates");
  EXPECT_THAT(after->relation_names(), ElementsAre("likes", "hates"));
}

TEST(LiveGraphTest, OldSnapshotKeepsItsEdgesAndCountsAfterLaterChunks) {
  LiveGraph graph;
  graph.Apply(Delta({"a", "b"}, {"r"}, {{0, 0, 1}}, 1));
  auto old = graph.Snapshot();
  const absl::Span<const Neighbor> old_out = old->OutEdges(0);
  const Neighbor* old_data = old_out.data();
  for (uint64_t seq = 2; seq < 50; ++seq) {
    graph.Apply(Delta({"x" + std::to_string(seq)}, {},
                      {{0, 0, static_cast<EntityId>(seq)}, {1, 0, 0}}, seq));
  }
  EXPECT_EQ(old->sequence(), 1u);
  EXPECT_EQ(old->num_facts(), 1u);
  EXPECT_EQ(old->num_entities(), 2u);
  EXPECT_EQ(old->OutEdges(0).data(), old_data);
  EXPECT_THAT(old->OutEdges(0), ElementsAre(Neighbor{1, 0}));
  EXPECT_THAT(old->InEdges(0), IsEmpty());

  auto latest = graph.Snapshot();
  EXPECT_EQ(latest->sequence(), 49u);
  EXPECT_EQ(latest->num_facts(), 1u + 48u + 1u);  // {1,0,0} is new once, then repeated
  EXPECT_EQ(latest->OutEdges(0).size(), 49u);
  EXPECT_THAT(latest->InEdges(0), ElementsAre(Neighbor{1, 0}));
}

TEST(LiveGraphTest, SnapshotsListTheEntitiesWithSelfLoopsOfTheirVersion) {
  LiveGraph graph;
  graph.Apply(Delta({"a", "b", "c"}, {"r", "s"}, {{0, 0, 1}, {2, 0, 2}}, 1));
  auto first = graph.Snapshot();
  graph.Apply(Delta({}, {}, {{2, 1, 2}, {0, 1, 0}, {1, 0, 2}}, 2));
  EXPECT_THAT(first->SelfLoopEntities(), ElementsAre(2u));
  EXPECT_THAT(graph.Snapshot()->SelfLoopEntities(), ElementsAre(0u, 2u));
}

TEST(LiveGraphTest, RemovingAnEntitysLastSelfLoopTakesItOffTheList) {
  LiveGraph graph;
  graph.Apply(Delta({"a", "b"}, {"r", "s"}, {{0, 0, 0}, {0, 1, 0}, {1, 0, 1}, {0, 0, 1}}, 1));
  GraphDelta first = Delta({}, {}, {}, 2);
  first.removed_facts = {{0, 0, 0}, {1, 0, 1}};
  graph.Apply(first);
  auto middle = graph.Snapshot();
  // Entity 0 still has its loop through relation 1.
  EXPECT_THAT(middle->SelfLoopEntities(), ElementsAre(0u));
  EXPECT_EQ(middle->num_facts(), 2u);
  GraphDelta second = Delta({}, {}, {}, 3);
  second.removed_facts = {{0, 1, 0}};
  graph.Apply(second);
  EXPECT_THAT(graph.Snapshot()->SelfLoopEntities(), IsEmpty());
  EXPECT_THAT(middle->SelfLoopEntities(), ElementsAre(0u));
  EXPECT_EQ(graph.Snapshot()->num_facts(), 1u);
  EXPECT_THAT(graph.Snapshot()->OutEdges(0), ElementsAre(Neighbor{1, 0}));
}

TEST(LiveGraphTest, ApplyCountsOnlyFactsNotAlreadyInTheGraph) {
  LiveGraph graph;
  EXPECT_EQ(graph.Apply(Delta({"a", "b"}, {"r"}, {{0, 0, 1}, {0, 0, 1}, {1, 0, 0}}, 1)), 2u);
  EXPECT_EQ(graph.Apply(Delta({}, {}, {{0, 0, 1}}, 2)), 0u);
  EXPECT_EQ(graph.Snapshot()->num_facts(), 2u);
  EXPECT_EQ(graph.Snapshot()->sequence(), 2u);
}

TEST(LiveGraphTest, SnapshotOutlivesTheGraphThatMadeIt) {
  std::shared_ptr<const GraphSnapshot> snapshot;
  {
    LiveGraph graph;
    graph.Apply(Delta({"a", "b"}, {"r"}, {{0, 0, 1}}, 1));
    snapshot = graph.Snapshot();
  }
  EXPECT_EQ(snapshot->EntityName(1), "b");
  EXPECT_EQ(snapshot->FindEntity("a"), 0u);
  EXPECT_THAT(snapshot->OutEdges(0), ElementsAre(Neighbor{1, 0}));
}

TEST(LiveGraphTest, MemoryUsageGrowsWithTheGraph) {
  LiveGraph graph;
  const uint64_t empty = graph.ApproximateMemoryUsage().total();
  graph.Apply(Delta({"a", "b"}, {"r"}, {{0, 0, 1}}, 1));
  const LiveGraph::MemoryUsage usage = graph.ApproximateMemoryUsage();
  EXPECT_GT(usage.total(), empty);
  // One edge list of two neighbours at least, both names, one relation.
  EXPECT_GE(usage.adjacency_bytes, 2 * sizeof(Neighbor));
  EXPECT_GE(usage.entity_name_bytes, 2 * sizeof(std::string));
  EXPECT_GE(usage.relation_name_bytes, sizeof(std::string));
}

// The pairs of relation sides a snapshot lists are the ones its facts make meet, after any
// mix of additions and removals (hubs' sides counted fact by fact, others' read off their
// lists), and a snapshot keeps the pairs of its own version.
TEST(LiveGraphTest, RelationSidePairsFollowAdditionsAndRemovals) {
  LiveGraph graph;
  std::vector<std::string> names;
  for (int i = 0; i < 60; ++i) names.push_back("e" + std::to_string(i));
  graph.Apply(Delta(names, {"r0", "r1", "r2", "r3", "r4"}, {}, 1));
  std::mt19937_64 rng(7);
  std::vector<Triple> held;
  std::shared_ptr<const GraphSnapshot> early;
  RelationSidePairs early_pairs;
  for (uint64_t seq = 2; seq < 40; ++seq) {
    GraphDelta delta;
    delta.sequence = seq;
    // Enough facts that the hubs pass the degree from which the live graph counts their
    // sides fact by fact; repeats and facts already held come with them.
    delta.facts = RandomFacts(60, 40, seq);
    for (size_t i = 0; i < 12 && !held.empty(); ++i) {
      delta.removed_facts.push_back(held[rng() % held.size()]);
    }
    graph.Apply(delta);
    held.insert(held.end(), delta.facts.begin(), delta.facts.end());
    const auto snapshot = graph.Snapshot();
    std::vector<Triple> facts;
    for (EntityId e = 0; e < snapshot->num_entities(); ++e) {
      for (const Neighbor& n : snapshot->OutEdges(e)) facts.push_back({e, n.relation, n.entity});
    }
    held = facts;
    const StaticGraph expected(snapshot->num_entities(), facts);
    EXPECT_EQ(*snapshot->SidePairs(), ComputeRelationSidePairs(expected)) << "sequence " << seq;
    EXPECT_EQ(*snapshot->SidePairs(), *expected.SidePairs());
    if (seq == 5) {
      early = snapshot;
      early_pairs = *snapshot->SidePairs();
    }
  }
  EXPECT_EQ(*early->SidePairs(), early_pairs);
}

// Off, a live graph lists no pairs whatever its chunks; turned on, it counts them off the
// graph as it is (hubs included) and follows every later chunk as a graph that always tracked
// them would; turned off again, new snapshots list none and older ones keep theirs.
TEST(LiveGraphTest, RelationSideTrackingTurnedOnCountsTheGraphAndFollowsItFromThere) {
  LiveGraph graph(/*relation_sides=*/false);
  std::vector<std::string> names;
  for (int i = 0; i < 60; ++i) names.push_back("e" + std::to_string(i));
  graph.Apply(Delta(names, {"r0", "r1", "r2", "r3", "r4"}, {}, 1));
  std::mt19937_64 rng(11);
  auto next_chunk = [&](uint64_t seq) {
    GraphDelta delta;
    delta.sequence = seq;
    delta.facts = RandomFacts(60, 40, seq);
    const auto snapshot = graph.Snapshot();
    std::set<EntityId> chosen;  // one fact of each: a fact is removed once
    for (size_t i = 0; i < 12; ++i) chosen.insert(rng() % snapshot->num_entities());
    for (const EntityId e : chosen) {
      for (const Neighbor& n : snapshot->OutEdges(e)) {
        delta.removed_facts.push_back({e, n.relation, n.entity});
        break;
      }
    }
    graph.Apply(delta);
  };
  auto counted = [&] {
    const auto snapshot = graph.Snapshot();
    std::vector<Triple> facts;
    for (EntityId e = 0; e < snapshot->num_entities(); ++e) {
      for (const Neighbor& n : snapshot->OutEdges(e)) facts.push_back({e, n.relation, n.entity});
    }
    return ComputeRelationSidePairs(StaticGraph(snapshot->num_entities(), facts));
  };
  for (uint64_t seq = 2; seq < 15; ++seq) {
    next_chunk(seq);
    EXPECT_TRUE(graph.Snapshot()->SidePairs()->empty()) << seq;
  }
  graph.TrackRelationSides(true);
  EXPECT_TRUE(graph.tracks_relation_sides());
  EXPECT_EQ(graph.Snapshot()->sequence(), 14u);
  ASSERT_FALSE(graph.Snapshot()->SidePairs()->empty());
  EXPECT_EQ(*graph.Snapshot()->SidePairs(), counted());
  for (uint64_t seq = 15; seq < 30; ++seq) {
    next_chunk(seq);
    EXPECT_EQ(*graph.Snapshot()->SidePairs(), counted()) << seq;
  }
  const std::shared_ptr<const GraphSnapshot> tracked = graph.Snapshot();
  const RelationSidePairs pairs = *tracked->SidePairs();
  graph.TrackRelationSides(false);
  EXPECT_TRUE(graph.Snapshot()->SidePairs()->empty());
  EXPECT_EQ(graph.Snapshot()->num_facts(), tracked->num_facts());
  EXPECT_EQ(*tracked->SidePairs(), pairs);
  next_chunk(30);
  EXPECT_TRUE(graph.Snapshot()->SidePairs()->empty());
}

// The pairs' bound (StoreOptions::max_relation_side_pairs) is checked fact by fact before a
// chunk is written: the position found is the first prefix of the chunk whose facts, added,
// make more pairs meet than the bound, on hubs (sides counted fact by fact) and on entities
// whose lists are read, new entities included; and nothing changes.
TEST(LiveGraphTest, TheFirstFactPastAPairBoundIsTheOneWhosePrefixPassesIt) {
  LiveGraph graph;
  std::vector<std::string> names, relations;
  for (int i = 0; i < 120; ++i) names.push_back("e" + std::to_string(i));
  for (int r = 0; r < 12; ++r) relations.push_back("r" + std::to_string(r));
  std::vector<Triple> base = RandomFacts(120, 60, 3);
  // e0: a hub of r0 and r1, past the degree from which its sides are counted fact by fact.
  for (EntityId i = 1; i < 120; ++i) base.push_back({0, i % 2, i});
  for (Triple& t : base) t.relation %= 3;  // the graph so far: 3
  graph.Apply(Delta(names, relations, base, 1));
  const uint64_t now = graph.Snapshot()->SidePairs()->size();
  auto pairs_with = [&](const std::vector<Triple>& added) {
    std::vector<Triple> facts = base;
    facts.insert(facts.end(), added.begin(), added.end());
    return ComputeRelationSidePairs(StaticGraph(125, facts)).size();
  };
  std::mt19937_64 rng(11);
  for (int round = 0; round < 20; ++round) {
    std::vector<Triple> chunk;
    for (int i = 0; i < 25; ++i) {
      // The hub, the others and entities the chunk brings (120..124), with every relation.
      const EntityId head = rng() % 3 == 0 ? 0 : static_cast<EntityId>(rng() % 125);
      const Triple t{head, static_cast<RelationId>(rng() % 12), static_cast<EntityId>(rng() % 125)};
      if (!graph.Snapshot()->HasFact(t.head, t.relation, t.tail)) chunk.push_back(t);
    }
    const uint64_t limit = now + rng() % 60;
    std::optional<size_t> expected;
    for (size_t i = 0; i < chunk.size() && !expected; ++i) {
      if (pairs_with({chunk.begin(), chunk.begin() + i + 1}) > limit) expected = i;
    }
    EXPECT_EQ(graph.FirstFactPastRelationPairLimit(chunk, limit), expected) << "round " << round;
  }
  EXPECT_EQ(graph.Snapshot()->SidePairs()->size(), now);
  // A graph already past a bound takes a chunk that makes no new pair meet.
  EXPECT_EQ(graph.FirstFactPastRelationPairLimit({base[0]}, 1), std::nullopt);
}

TEST(LiveGraphTest, RelationSidesMeetOnlyWhereAnEntityHoldsBoth) {
  LiveGraph graph;
  // a -r-> b, b -s-> c: b is the tail of r and the head of s.
  graph.Apply(Delta({"a", "b", "c"}, {"r", "s"}, {{0, 0, 1}, {1, 1, 2}}, 1));
  const uint32_t rh = HeadSide(0), rt = TailSide(0), sh = HeadSide(1), st = TailSide(1);
  EXPECT_EQ(*graph.Snapshot()->SidePairs(),
            (RelationSidePairs{{rh, rh}, {rt, rt}, {rt, sh}, {sh, sh}, {st, st}}));
  GraphDelta remove;
  remove.sequence = 2;
  remove.removed_facts = {{1, 1, 2}};
  graph.Apply(remove);
  EXPECT_EQ(*graph.Snapshot()->SidePairs(), (RelationSidePairs{{rh, rh}, {rt, rt}}));
}

// A hub (more facts than the live graph reads off its lists) gains and loses a side by single
// facts, with repeats and facts already held in the same chunk: the pairs still equal the
// ones its facts make meet.
TEST(LiveGraphTest, RelationSidesOfAHubFollowItsFactsOneByOne) {
  LiveGraph graph;
  std::vector<std::string> names = {"hub"};
  std::vector<Triple> facts;
  for (EntityId i = 1; i <= 100; ++i) {
    names.push_back("leaf" + std::to_string(i));
    facts.push_back({0, 0, i});  // hub -common-> leaf i
  }
  graph.Apply(Delta(names, {"common", "rare"}, facts, 1));
  auto expect_pairs_of_facts = [&](const std::string& when) {
    const auto snapshot = graph.Snapshot();
    std::vector<Triple> held;
    for (EntityId e = 0; e < snapshot->num_entities(); ++e) {
      for (const Neighbor& n : snapshot->OutEdges(e)) held.push_back({e, n.relation, n.entity});
    }
    EXPECT_EQ(*snapshot->SidePairs(),
              ComputeRelationSidePairs(StaticGraph(snapshot->num_entities(), held)))
        << when;
  };
  GraphDelta rare;
  rare.sequence = 2;
  rare.facts = {{0, 1, 1}, {0, 1, 1}, {0, 0, 2}};  // a new side, twice; a fact held already
  graph.Apply(rare);
  expect_pairs_of_facts("after the hub's first fact of rare");
  const uint32_t common_head = HeadSide(0), rare_head = HeadSide(1);
  EXPECT_TRUE(absl::c_linear_search(*graph.Snapshot()->SidePairs(),
                                    std::make_pair(common_head, rare_head)));
  GraphDelta remove;
  remove.sequence = 3;
  remove.removed_facts = {{0, 1, 1}, {0, 1, 1}, {0, 1, 7}};  // its only one, twice; one absent
  graph.Apply(remove);
  expect_pairs_of_facts("after the hub's fact of rare is removed");
  EXPECT_FALSE(absl::c_linear_search(*graph.Snapshot()->SidePairs(),
                                     std::make_pair(common_head, rare_head)));
  GraphDelta back;
  back.sequence = 4;
  back.facts = {{5, 1, 0}};  // leaf5 -rare-> hub: the hub is now a tail of rare
  back.removed_facts = {{0, 0, 3}};
  graph.Apply(back);
  expect_pairs_of_facts("after the hub becomes a tail of rare");
}

}  // namespace
}  // namespace grail
