// Many enclosing subgraphs as one disjoint-union graph: the input of one model forward.
//
// Plain arrays (no LibTorch types), so code that assembles batches — the trainer, the
// evaluator, the server's batcher — compiles without LibTorch headers. Node and edge
// indices are global in the batch: each subgraph's nodes are offset by the nodes before it.
#ifndef GRAIL_MODEL_SUBGRAPH_BATCH_H_
#define GRAIL_MODEL_SUBGRAPH_BATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "model/enclosing_subgraph.h"

namespace grail {

// Maps relation ids of the graph a subgraph came from to the model's relation ids; -1 for a
// relation the model does not know (its edges carry no learnt weights and are left out).
using RelationMap = std::vector<int32_t>;

// The map from a graph's relations (names in graph id order) to a model's (names in model
// id order), matching by name: a graph whose ids were assigned in another order (a live
// store, a file indexed on its own) still feeds the model the relations it learnt.
RelationMap MapRelationsByName(absl::Span<const std::string> graph_relations,
                               absl::Span<const std::string> model_relations);

// Relation r's model id under `relations`, -1 if the model does not know it. An empty map is
// the identity (a model whose ids are the graph's: ULTRA's, which has no vocabulary).
inline int32_t ModelRelation(const RelationMap& relations, uint32_t r) {
  if (relations.empty()) return static_cast<int32_t>(r);
  return r < relations.size() ? relations[r] : -1;
}

struct SubgraphBatch {
  // Per node.
  std::vector<int64_t> dist_u;      // d(i, u); kFarDistance for "beyond k"
  std::vector<int64_t> dist_v;      // d(i, v)
  std::vector<int64_t> node_graph;  // index of the subgraph the node belongs to
  // Early fusion: the node's row of the model's node features; filled from the subgraphs'
  // node_feature, empty when they have none.
  std::vector<int64_t> node_feature;
  // Per edge, direction head -> tail.
  std::vector<int64_t> edge_src;
  std::vector<int64_t> edge_dst;
  std::vector<int64_t> edge_relation;  // model relation id
  // Per subgraph.
  std::vector<int64_t> head_index;       // global node index of u
  std::vector<int64_t> tail_index;       // global node index of v
  std::vector<int64_t> target_relation;  // model relation id of r_t

  int64_t num_graphs() const { return static_cast<int64_t>(head_index.size()); }
  int64_t num_nodes() const { return static_cast<int64_t>(node_graph.size()); }
  int64_t num_edges() const { return static_cast<int64_t>(edge_src.size()); }

  void Clear();
  // Appends `subgraph` as the next graph of the batch. `target_relation` is the model id of
  // the relation being scored; edges whose relation maps to -1 in `relations` are dropped
  // (an empty map means graph ids already are model ids).
  void Add(const EnclosingSubgraph& subgraph, int64_t target_relation,
           const RelationMap& relations);
};

}  // namespace grail

#endif  // GRAIL_MODEL_SUBGRAPH_BATCH_H_
