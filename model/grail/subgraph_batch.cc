#include "model/grail/subgraph_batch.h"

namespace grail {

void SubgraphBatch::Clear() {
  for (std::vector<int64_t>* v :
       {&dist_u, &dist_v, &node_graph, &node_feature, &edge_src, &edge_dst, &edge_relation,
        &head_index, &tail_index, &target_relation}) {
    v->clear();
  }
}

void SubgraphBatch::Add(const EnclosingSubgraph& subgraph, int64_t target,
                        const RelationMap& relations) {
  const int64_t offset = num_nodes();
  const int64_t graph = num_graphs();
  for (int32_t i = 0; i < subgraph.num_nodes(); ++i) {
    dist_u.push_back(subgraph.dist_u[i]);
    dist_v.push_back(subgraph.dist_v[i]);
    node_graph.push_back(graph);
  }
  node_feature.insert(node_feature.end(), subgraph.node_feature.begin(),
                      subgraph.node_feature.end());
  for (int32_t k = 0; k < subgraph.num_edges(); ++k) {
    int64_t relation = subgraph.edge_relation[k];
    if (k == subgraph.target_edge) {
      relation = target;
    } else {
      relation = relations(static_cast<uint32_t>(relation));
      if (relation < 0) continue;
    }
    edge_src.push_back(offset + subgraph.edge_src[k]);
    edge_dst.push_back(offset + subgraph.edge_dst[k]);
    edge_relation.push_back(relation);
  }
  head_index.push_back(offset);      // u is local node 0
  tail_index.push_back(offset + 1);  // v is local node 1
  target_relation.push_back(target);
}

}  // namespace grail
