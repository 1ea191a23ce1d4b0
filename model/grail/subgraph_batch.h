// Many enclosing subgraphs as one disjoint-union graph: the input of one model forward.
//
// Plain arrays (no LibTorch types), so code that assembles batches — the trainer, the
// evaluator, the server's batcher — compiles without LibTorch headers. Node and edge
// indices are global in the batch: each subgraph's nodes are offset by the nodes before it.
#ifndef GRAIL_MODEL_GRAIL_SUBGRAPH_BATCH_H_
#define GRAIL_MODEL_GRAIL_SUBGRAPH_BATCH_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"
#include "graph/relation_map.h"
#include "model/grail/enclosing_subgraph.h"

namespace grail {

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

#endif  // GRAIL_MODEL_GRAIL_SUBGRAPH_BATCH_H_
