#include "model/subgraph_json.h"

#include "absl/strings/str_cat.h"
#include "model/json_text.h"

namespace grail {
namespace {

void AppendDistance(std::string* out, uint8_t distance) {
  if (distance == kFarDistance) {
    out->append("null");
  } else {
    absl::StrAppend(out, distance);
  }
}

}  // namespace

std::string SubgraphToJson(const EnclosingSubgraph& subgraph, const Vocabulary& entities,
                           const Vocabulary& relations) {
  std::string out = "{\"nodes\":[";
  for (int32_t i = 0; i < subgraph.num_nodes(); ++i) {
    if (i > 0) out.push_back(',');
    out.append("{\"name\":");
    AppendJsonString(&out, entities.Name(subgraph.nodes[i]));
    out.append(",\"du\":");
    AppendDistance(&out, subgraph.dist_u[i]);
    out.append(",\"dv\":");
    AppendDistance(&out, subgraph.dist_v[i]);
    out.push_back('}');
  }
  out.append("],\"edges\":[");
  for (int32_t k = 0; k < subgraph.num_edges(); ++k) {
    if (k > 0) out.push_back(',');
    out.append("{\"head\":");
    AppendJsonString(&out, entities.Name(subgraph.nodes[subgraph.edge_src[k]]));
    out.append(",\"relation\":");
    AppendJsonString(&out, relations.Name(subgraph.edge_relation[k]));
    out.append(",\"tail\":");
    AppendJsonString(&out, entities.Name(subgraph.nodes[subgraph.edge_dst[k]]));
    out.push_back('}');
  }
  absl::StrAppend(&out, "],\"target_edge\":", subgraph.target_edge,
                  ",\"target_in_graph\":", subgraph.target_in_graph ? "true" : "false", "}");
  return out;
}

}  // namespace grail
