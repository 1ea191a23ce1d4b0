#include "graph/static_graph.h"

#include <algorithm>

#include "graph/relation_sides.h"

namespace grail {
namespace {

// Fills `offsets` and `entries` with, for each key entity, its (other, relation) pairs
// sorted and deduplicated. `key` / `other` pick the two ends of a fact.
template <typename KeyFn, typename OtherFn>
void BuildCsr(uint32_t num_entities, absl::Span<const Triple> facts, KeyFn key, OtherFn other,
              std::vector<uint64_t>* offsets, std::vector<Neighbor>* entries) {
  std::vector<uint64_t> counts(num_entities + 1, 0);
  for (const Triple& t : facts) ++counts[key(t) + 1];
  for (uint32_t e = 0; e < num_entities; ++e) counts[e + 1] += counts[e];
  std::vector<Neighbor> filled(facts.size());
  std::vector<uint64_t> cursor(counts.begin(), counts.end() - 1);
  for (const Triple& t : facts) filled[cursor[key(t)]++] = Neighbor{other(t), t.relation};

  // Sort and deduplicate each slice, compacting in place.
  offsets->assign(num_entities + 1, 0);
  uint64_t write = 0;
  for (uint32_t e = 0; e < num_entities; ++e) {
    auto begin = filled.begin() + counts[e];
    auto end = filled.begin() + counts[e + 1];
    std::sort(begin, end);
    auto unique_end = std::unique(begin, end);
    write = std::move(begin, unique_end, filled.begin() + write) - filled.begin();
    (*offsets)[e + 1] = write;
  }
  filled.resize(write);
  filled.shrink_to_fit();
  *entries = std::move(filled);
}

}  // namespace

StaticGraph::StaticGraph(uint32_t num_entities, absl::Span<const Triple> facts)
    : num_entities_(num_entities) {
  for (const Triple& t : facts) num_relations_ = std::max(num_relations_, t.relation + 1);
  BuildCsr(
      num_entities, facts, [](const Triple& t) { return t.head; },
      [](const Triple& t) { return t.tail; }, &out_offsets_, &out_);
  BuildCsr(
      num_entities, facts, [](const Triple& t) { return t.tail; },
      [](const Triple& t) { return t.head; }, &in_offsets_, &in_);
  for (const Triple& t : facts) {
    if (t.head == t.tail) self_loops_.push_back(t.head);
  }
  std::sort(self_loops_.begin(), self_loops_.end());
  self_loops_.erase(std::unique(self_loops_.begin(), self_loops_.end()), self_loops_.end());
}

std::shared_ptr<const RelationSidePairs> StaticGraph::SidePairs() const {
  std::call_once(side_pairs_->once, [this] {
    side_pairs_->pairs = std::make_shared<const RelationSidePairs>(ComputeRelationSidePairs(*this));
  });
  return side_pairs_->pairs;
}

std::vector<Triple> StaticGraph::Facts() const {
  std::vector<Triple> facts;
  facts.reserve(out_.size());
  for (EntityId h = 0; h < num_entities_; ++h) {
    for (const Neighbor& n : OutEdges(h)) facts.push_back({h, n.relation, n.entity});
  }
  std::sort(facts.begin(), facts.end());
  return facts;
}

}  // namespace grail
