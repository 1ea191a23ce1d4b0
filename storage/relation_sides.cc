#include "storage/relation_sides.h"

#include <algorithm>
#include <iterator>

#include "absl/container/flat_hash_set.h"

namespace grail {
namespace {

uint64_t Key(uint32_t x, uint32_t y) {
  return x <= y ? (uint64_t{x} << 32 | y) : (uint64_t{y} << 32 | x);
}

std::pair<uint32_t, uint32_t> Unkey(uint64_t key) {
  return {static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key)};
}

}  // namespace

void EntitySides(absl::Span<const Neighbor> out, absl::Span<const Neighbor> in,
                 std::vector<uint32_t>* sides) {
  sides->clear();
  for (const Neighbor& n : out) sides->push_back(HeadSide(n.relation));
  for (const Neighbor& n : in) sides->push_back(TailSide(n.relation));
  std::sort(sides->begin(), sides->end());
  sides->erase(std::unique(sides->begin(), sides->end()), sides->end());
}

RelationSidePairs ComputeRelationSidePairs(const GraphView& graph) {
  absl::flat_hash_set<uint64_t> pairs;
  std::vector<uint32_t> sides;
  for (EntityId e = 0; e < graph.num_entities(); ++e) {
    EntitySides(graph.OutEdges(e), graph.InEdges(e), &sides);
    for (size_t i = 0; i < sides.size(); ++i) {
      for (size_t j = i; j < sides.size(); ++j) pairs.insert(Key(sides[i], sides[j]));
    }
  }
  RelationSidePairs sorted;
  sorted.reserve(pairs.size());
  for (uint64_t key : pairs) sorted.push_back(Unkey(key));
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

void RelationSideCounts::Add(uint32_t x, uint32_t y, int64_t delta) {
  const uint64_t key = Key(x, y);
  int64_t& count = count_[key];
  const bool met = count > 0;
  count += delta;
  if ((count > 0) != met) changed_ = true;
  if (count == 0) count_.erase(key);
}

void RelationSideCounts::Update(absl::Span<const uint32_t> before,
                                absl::Span<const uint32_t> after) {
  // The entity's pairs are those among its kept sides K, between K and its removed (added)
  // sides, and among the removed (added): only the last two kinds change. Lists are short
  // (an entity's distinct relation sides).
  std::vector<uint32_t> kept, removed, added;
  std::set_intersection(before.begin(), before.end(), after.begin(), after.end(),
                        std::back_inserter(kept));
  std::set_difference(before.begin(), before.end(), after.begin(), after.end(),
                      std::back_inserter(removed));
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(),
                      std::back_inserter(added));
  auto change = [&](const std::vector<uint32_t>& sides, int64_t delta) {
    for (size_t i = 0; i < sides.size(); ++i) {
      for (uint32_t k : kept) Add(sides[i], k, delta);
      for (size_t j = i; j < sides.size(); ++j) Add(sides[i], sides[j], delta);
    }
  };
  change(removed, -1);
  change(added, +1);
}

RelationSidePairs RelationSideCounts::Pairs() {
  changed_ = false;
  RelationSidePairs sorted;
  sorted.reserve(count_.size());
  for (const auto& [key, count] : count_) sorted.push_back(Unkey(key));
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

}  // namespace grail
