// libFuzzer target: enclosing-subgraph extraction on arbitrary small graphs against the
// plain reference implementation of the definition (tests/testing/reference_extraction.h).
// The input's bytes choose the graph (up to 24 entities, 4 relations, 60 facts), k, the
// enclosing/union variant and the target; the two must agree on every node's labels and on
// the multiset of edges, and on the ranking path (one target's neighbourhood reused).
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "graph/static_graph.h"
#include "model/grail/enclosing_subgraph.h"
#include "tests/testing/reference_extraction.h"

namespace {

class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint32_t Next(uint32_t bound) { return empty() ? 0 : data_[pos_++] % bound; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using grail::EntityId;
  using grail::RelationId;
  Bytes in(data, size);
  const uint32_t n = 2 + in.Next(23);
  const uint32_t relations = 1 + in.Next(4);
  const int k = 1 + static_cast<int>(in.Next(4));
  const bool enclosing = in.Next(4) != 0;
  const EntityId u = in.Next(n);
  EntityId v = in.Next(n);
  if (v == u) v = (u + 1) % n;
  const RelationId r = in.Next(relations);
  std::vector<grail::Triple> facts;
  while (!in.empty() && facts.size() < 60) {
    const EntityId h = in.Next(n);
    const RelationId rel = in.Next(relations);
    facts.push_back({h, rel, in.Next(n)});
  }
  const grail::StaticGraph graph(n, facts);

  grail::ExtractionConfig config;
  config.hops = k;
  config.enclosing = enclosing;
  grail::SubgraphExtractor extractor(config);
  grail::EnclosingSubgraph out;
  FUZZ_CHECK(extractor.Extract(graph, u, r, v, /*hide_target_fact=*/false, &out).ok());
  const grail::ReferenceSubgraph expected = grail::ReferenceExtract(graph, u, r, v, k, enclosing);

  std::map<EntityId, std::pair<int, int>> labels;
  for (int i = 0; i < out.num_nodes(); ++i) labels[out.nodes[i]] = {out.dist_u[i], out.dist_v[i]};
  std::multiset<std::tuple<EntityId, RelationId, EntityId>> edges;
  for (int e = 0; e < out.num_edges(); ++e) {
    edges.insert({out.nodes[out.edge_src[e]], out.edge_relation[e], out.nodes[out.edge_dst[e]]});
  }
  FUZZ_CHECK(out.nodes[0] == u && out.nodes[1] == v);
  FUZZ_CHECK(labels == expected.labels);
  FUZZ_CHECK(edges == expected.edges);

  // Ranking's path: the head's neighbourhood computed once, then reused.
  const grail::TargetNeighbourhood fixed = grail::TargetNeighbourhood::Expand(graph, u, config);
  grail::EnclosingSubgraph reused;
  FUZZ_CHECK(extractor.Extract(graph, u, r, v, fixed, &reused).ok());
  FUZZ_CHECK(reused.nodes == out.nodes && reused.dist_u == out.dist_u &&
             reused.dist_v == out.dist_v && reused.edge_src == out.edge_src &&
             reused.edge_dst == out.edge_dst && reused.edge_relation == out.edge_relation &&
             reused.target_edge == out.target_edge);
  return 0;
}
