// The map from the relation ids of a graph to a model's relation ids.
//
// A graph whose ids were assigned in another order than the model's (a live store, a file
// indexed on its own) still feeds the model the relations it learnt: the map matches them by
// name. A relation the model does not know maps to -1 (its edges carry no learnt weights and
// are left out). The identity map (a default-constructed one) is for models whose ids are the
// graph's: ULTRA's, which has no vocabulary, and graphs indexed from the model's vocabulary.
#ifndef GRAIL_GRAPH_RELATION_MAP_H_
#define GRAIL_GRAPH_RELATION_MAP_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/types/span.h"

namespace grail {

class RelationMap {
 public:
  using value_type = int32_t;
  using const_iterator = std::vector<int32_t>::const_iterator;

  // The identity.
  RelationMap() = default;
  // Graph relation r maps to model_ids[r]; relations past the end map to -1.
  explicit RelationMap(std::vector<int32_t> model_ids) : ids_(std::move(model_ids)) {}
  RelationMap(std::initializer_list<int32_t> model_ids) : ids_(model_ids) {}

  // Graph relation r's model id, or -1 when the model does not know it. The identity maps r
  // to itself.
  int32_t operator()(uint32_t r) const {
    if (ids_.empty()) return static_cast<int32_t>(r);
    return r < ids_.size() ? ids_[r] : -1;
  }

  bool identity() const { return ids_.empty(); }
  // The explicit entries (none for the identity).
  size_t size() const { return ids_.size(); }
  bool empty() const { return ids_.empty(); }
  const_iterator begin() const { return ids_.begin(); }
  const_iterator end() const { return ids_.end(); }
  bool operator==(const RelationMap& other) const { return ids_ == other.ids_; }

 private:
  std::vector<int32_t> ids_;
};

// The map matching `graph_relations` (names in graph id order) with `model_relations` (names
// in model id order) by name.
RelationMap MapRelationsByName(absl::Span<const std::string> graph_relations,
                               absl::Span<const std::string> model_relations);

}  // namespace grail

#endif  // GRAIL_GRAPH_RELATION_MAP_H_
