#include "graph/relation_map.h"

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace grail {

RelationMap MapRelationsByName(absl::Span<const std::string> graph_relations,
                               absl::Span<const std::string> model_relations) {
  absl::flat_hash_map<absl::string_view, int32_t> model_ids;
  for (size_t m = 0; m < model_relations.size(); ++m) {
    model_ids.emplace(model_relations[m], static_cast<int32_t>(m));
  }
  std::vector<int32_t> ids(graph_relations.size(), -1);
  for (size_t r = 0; r < graph_relations.size(); ++r) {
    auto it = model_ids.find(graph_relations[r]);
    if (it != model_ids.end()) ids[r] = it->second;
  }
  return RelationMap(std::move(ids));
}

}  // namespace grail
