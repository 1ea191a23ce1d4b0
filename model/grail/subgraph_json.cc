#include "model/grail/subgraph_json.h"

#include <utility>

#include "common/json.h"

namespace grail {
namespace {

// A distance beyond k (kFarDistance) is null.
Json Distance(uint8_t distance) {
  if (distance == kFarDistance) return nullptr;
  return distance;
}

}  // namespace

std::string SubgraphToJson(const EnclosingSubgraph& subgraph, const Vocabulary& entities,
                           const Vocabulary& relations) {
  Json nodes = Json::array();
  for (int32_t i = 0; i < subgraph.num_nodes(); ++i) {
    nodes.push_back({{"name", entities.Name(subgraph.nodes[i])},
                     {"du", Distance(subgraph.dist_u[i])},
                     {"dv", Distance(subgraph.dist_v[i])}});
  }
  Json edges = Json::array();
  for (int32_t k = 0; k < subgraph.num_edges(); ++k) {
    edges.push_back({{"head", entities.Name(subgraph.nodes[subgraph.edge_src[k]])},
                     {"relation", relations.Name(subgraph.edge_relation[k])},
                     {"tail", entities.Name(subgraph.nodes[subgraph.edge_dst[k]])}});
  }
  return JsonLine({{"nodes", std::move(nodes)},
                   {"edges", std::move(edges)},
                   {"target_edge", subgraph.target_edge},
                   {"target_in_graph", subgraph.target_in_graph}});
}

}  // namespace grail
