// Enclosing-subgraph extraction and double-radius node labelling (GraIL, Section 3 steps
// 1-2; SPEC "GraIL, precisely").
//
// For a target fact (u, r_t, v) the enclosing subgraph is:
//   1. N_k(u), N_k(v): the k-hop neighbourhoods of u and v, ignoring edge direction,
//      optionally capped at `max_nodes_per_hop` newly reached nodes per hop (a
//      deterministic sample, so hubs stay bounded and the same query gives the same graph).
//   2. The candidate nodes {u, v} ∪ (N_k(u) ∩ N_k(v)), with every fact of the graph among
//      them (directions and relations kept).
//   3. Labels: d(i,u) is the undirected shortest distance from i to u inside the candidate
//      subgraph with v removed, d(i,v) likewise with u removed. Nodes with a distance > k
//      (including unreachable ones) are dropped; u is labelled (0,1) and v (1,0).
//   4. The target edge u -r_t-> v is added if the graph does not already contain it.
// The "no enclosing" ablation (ExtractionConfig::enclosing = false) keeps the plain union
// N_k(u) ∪ N_k(v) ∪ {u, v} instead and drops nothing; a distance > k is then labelled
// kFarDistance (its one-hot part is all zeros).
#ifndef GRAIL_MODEL_GRAIL_ENCLOSING_SUBGRAPH_H_
#define GRAIL_MODEL_GRAIL_ENCLOSING_SUBGRAPH_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "graph/graph_view.h"
#include "graph/ids.h"

namespace grail {

struct ExtractionConfig {
  int hops = 3;               // k
  int max_nodes_per_hop = 0;  // cap on newly reached nodes per hop of each BFS; 0 = none
  bool enclosing = true;      // false: the "no enclosing subgraph" ablation (k-hop union)

  friend bool operator==(const ExtractionConfig& a, const ExtractionConfig& b) {
    return a.hops == b.hops && a.max_nodes_per_hop == b.max_nodes_per_hop &&
           a.enclosing == b.enclosing;
  }
};

// A distance label meaning "farther than k" (only in the union ablation).
inline constexpr uint8_t kFarDistance = 0xff;

// One extracted subgraph with local node indices. Node 0 is u (the head), node 1 is v.
struct EnclosingSubgraph {
  std::vector<EntityId> nodes;  // global id of each local node
  std::vector<uint8_t> dist_u;  // d(i, u) per node; u: 0, v: 1
  std::vector<uint8_t> dist_v;  // d(i, v) per node; u: 1, v: 0
  // Edges in direction head -> tail, local indices; the target edge is among them.
  std::vector<int32_t> edge_src;
  std::vector<int32_t> edge_dst;
  std::vector<RelationId> edge_relation;
  int32_t target_edge = -1;      // index of u -r_t-> v in the edge arrays
  bool target_in_graph = false;  // whether the graph (as seen by the extraction) had it
  // Early fusion: each node's row of the model's node features (AttachNodeFeatures); empty
  // for models without them. Extraction leaves it empty.
  std::vector<int32_t> node_feature;

  int32_t num_nodes() const { return static_cast<int32_t>(nodes.size()); }
  int32_t num_edges() const { return static_cast<int32_t>(edge_src.size()); }
};

// When one side of many facts is the same entity (ranking every tail of (h, r, ?)), the
// search from that entity is the same for all of them: compute it once as a
// TargetNeighbourhood and hand it to SubgraphExtractor::Extract. The result is identical,
// node order included, to extracting without it.
class TargetNeighbourhood {
 public:
  // The k-hop neighbourhood of `root` exactly as an extraction with `config` computes it
  // (same per-hop sampling). Requires root < graph.num_entities().
  static TargetNeighbourhood Expand(const GraphView& graph, EntityId root,
                                    const ExtractionConfig& config);

  EntityId root() const { return root_; }
  // The entities reached, root first, in the order of the search.
  absl::Span<const EntityId> reached() const { return reached_; }
  // The position of `e` in reached(), or -1 if it was not reached.
  int64_t Position(EntityId e) const {
    auto it = position_.find(e);
    return it == position_.end() ? -1 : static_cast<int64_t>(it->second);
  }
  // Heap bytes held, approximately (for memory accounting).
  size_t MemoryBytes() const;

 private:
  EntityId root_ = 0;
  std::vector<EntityId> reached_;
  absl::flat_hash_map<EntityId, uint32_t> position_;
};

// The distance from which every enclosing subgraph is trivial. If the undirected distance
// d(u, v) is at least k + 2, the enclosing subgraph of (u, r, v) is {u, v} with the target
// edge and the self-loops of u and v, if they have any: a node i != u, v survives the labelling
// only if it reaches u within k hops through candidates other than v, so u has a candidate
// neighbour x != v, and x is a candidate only if d(x, v) <= k, which makes d(u, v) <= k + 1.
// Per-hop caps only remove candidates, so this holds with them too. (GraIL's paper phrases the same
// fact as "beyond 2k the neighbourhoods do not meet"; k + 1 is the tighter bound.) Only for the
// enclosing subgraph: the "no enclosing" ablation keeps both neighbourhoods whole.
inline int TrivialSubgraphDistance(const ExtractionConfig& config) { return config.hops + 2; }

// The entities within `hops` undirected hops of `root` (root included), in id order, over
// the whole graph with no sampling. nullopt if there are more than `max_entities` of them;
// the search stops as soon as it knows, so its cost is bounded by `max_entities` and their
// edges.
std::optional<std::vector<EntityId>> EntitiesWithinHops(const GraphView& graph, EntityId root,
                                                        int hops, size_t max_entities);

// Extracts enclosing subgraphs. Reuses its scratch buffers across calls, so an extractor
// is cheap to call repeatedly but must not be shared between threads: use one per thread.
class SubgraphExtractor {
 public:
  explicit SubgraphExtractor(const ExtractionConfig& config);

  const ExtractionConfig& config() const { return config_; }

  // Extracts the subgraph of (head, relation, tail) from `graph` into `*out` (its vectors
  // are reused). With `hide_target_fact`, the fact itself is treated as absent during
  // extraction and comes back only as the target edge (the trainer's option to keep u and
  // v from being adjacent only because of the fact being scored).
  // Errors: INVALID_ARGUMENT if head == tail or an id is outside the graph.
  absl::Status Extract(const GraphView& graph, EntityId head, RelationId relation, EntityId tail,
                       bool hide_target_fact, EnclosingSubgraph* out);
  // The same extraction with the neighbourhood of one target computed beforehand:
  // `fixed.root()` must be `head` or `tail`, and `fixed` must have been expanded on `graph`
  // with this extractor's config. The result equals Extract(..., false, out) exactly.
  // Errors: as Extract, and INVALID_ARGUMENT if `fixed` belongs to neither target.
  absl::Status Extract(const GraphView& graph, EntityId head, RelationId relation, EntityId tail,
                       const TargetNeighbourhood& fixed, EnclosingSubgraph* out);

 private:
  // Per-entity scratch, valid for an entity only while its stamp equals the current one.
  struct Scratch {
    std::vector<uint32_t> stamp;
  };

  absl::Status ExtractImpl(const GraphView& graph, EntityId head, RelationId relation,
                           EntityId tail, bool hide_target_fact, const TargetNeighbourhood* fixed,
                           EnclosingSubgraph* out);
  void Reserve(uint32_t num_entities);
  // Undirected BFS from `root` for config_.hops hops over the whole graph. Marks each
  // reached entity in `seen` and appends it to `reached` (root first).
  void ExpandNeighbourhood(const GraphView& graph, EntityId root, Scratch* seen,
                           std::vector<EntityId>* reached);

  // Undirected BFS inside the candidate set from local node `source`, never entering local
  // node `blocked`, up to config_.hops. Writes distances (kFarDistance if farther) to `dist`.
  void LabelDistances(int32_t source, int32_t blocked, std::vector<uint8_t>* dist);

  ExtractionConfig config_;
  uint32_t generation_ = 0;
  Scratch seen_u_, seen_v_;
  std::vector<uint32_t> local_stamp_;  // entity -> is a candidate in this generation
  std::vector<int32_t> local_index_;   // entity -> candidate index
  // Candidate subgraph in CSR form over local indices (undirected).
  std::vector<EntityId> candidates_;
  std::vector<int32_t> adjacency_offsets_;
  std::vector<int32_t> adjacency_;
  std::vector<int32_t> adjacency_cursor_;
  // BFS work lists.
  std::vector<EntityId> frontier_, next_, reached_u_, reached_v_;
  std::vector<std::pair<uint64_t, EntityId>> sample_;
  std::vector<std::pair<uint32_t, EntityId>> ordered_;
  std::vector<int32_t> queue_;
  std::vector<uint8_t> dist_u_, dist_v_;
  std::vector<int32_t> kept_index_;
  // The hidden fact, when hide_target_fact is set.
  bool hide_ = false;
  Triple hidden_;
};

}  // namespace grail

#endif  // GRAIL_MODEL_GRAIL_ENCLOSING_SUBGRAPH_H_
