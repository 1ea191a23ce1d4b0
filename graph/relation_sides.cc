#include "graph/relation_sides.h"

#include <algorithm>
#include <iterator>
#include <tuple>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"

namespace grail {
namespace {

uint64_t Key(uint32_t x, uint32_t y) {
  return x <= y ? (uint64_t{x} << 32 | y) : (uint64_t{y} << 32 | x);
}

std::pair<uint32_t, uint32_t> Unkey(uint64_t key) {
  return {static_cast<uint32_t>(key >> 32), static_cast<uint32_t>(key)};
}

// Whether an entity with these out- and in-edges holds `side`.
bool Holds(absl::Span<const Neighbor> out, absl::Span<const Neighbor> in, uint32_t side) {
  const absl::Span<const Neighbor> list = side % 2 == 0 ? out : in;
  return std::any_of(list.begin(), list.end(),
                     [&](const Neighbor& n) { return n.relation == side / 2; });
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

bool RelationSideCounts::Meets(uint32_t x, uint32_t y) const { return count_.contains(Key(x, y)); }

RelationSidePairs RelationSideCounts::Pairs() {
  changed_ = false;
  RelationSidePairs sorted;
  sorted.reserve(count_.size());
  for (const auto& [key, count] : count_) sorted.push_back(Unkey(key));
  std::sort(sorted.begin(), sorted.end());
  return sorted;
}

std::optional<size_t> RelationSideTracker::FirstFactPastPairLimit(absl::Span<const Triple> added,
                                                                  const GraphView& before,
                                                                  uint64_t limit) const {
  // A graph already past the limit (a limit lowered since) takes chunks that make no new
  // pair meet.
  uint64_t total = counts_.num_pairs();
  // The sides of each entity the chunk touches, as the chunk so far leaves them (sorted), and
  // the pairs the chunk so far makes meet.
  absl::flat_hash_map<EntityId, std::vector<uint32_t>> sides;
  absl::flat_hash_set<uint64_t> fresh;
  // Whether `before` has e hold `side` (most facts add a side their entities hold already:
  // those cost this look-up, in a hub's counts or a short list, and nothing more).
  auto held_before = [&](EntityId e, uint32_t side) {
    if (auto hub = hub_sides_.find(e); hub != hub_sides_.end()) {
      auto at = std::lower_bound(hub->second.begin(), hub->second.end(),
                                 std::make_pair(side, uint32_t{0}));
      return at != hub->second.end() && at->first == side;
    }
    return e < before.num_entities() && Holds(before.OutEdges(e), before.InEdges(e), side);
  };
  auto sides_before = [&](EntityId e) {
    std::vector<uint32_t> held;
    if (auto hub = hub_sides_.find(e); hub != hub_sides_.end()) {
      for (const auto& [side, count] : hub->second) held.push_back(side);
    } else if (e < before.num_entities()) {
      EntitySides(before.OutEdges(e), before.InEdges(e), &held);
    }
    return held;
  };
  // Entity e gains `side`: false once more than `limit` pairs meet.
  auto gain = [&](EntityId e, uint32_t side) {
    auto it = sides.find(e);
    if (it == sides.end()) {
      if (held_before(e, side)) return true;
      it = sides.emplace(e, sides_before(e)).first;
    }
    std::vector<uint32_t>& held = it->second;
    auto at = std::lower_bound(held.begin(), held.end(), side);
    if (at != held.end() && *at == side) return true;
    held.insert(at, side);
    for (uint32_t other : held) {  // the side itself included: a side meets itself
      if (!counts_.Meets(side, other) && fresh.insert(Key(side, other)).second && ++total > limit) {
        return false;
      }
    }
    return true;
  };
  for (size_t i = 0; i < added.size(); ++i) {
    const Triple& t = added[i];
    if (!gain(t.head, HeadSide(t.relation)) || !gain(t.tail, TailSide(t.relation))) return i;
  }
  return std::nullopt;
}

bool RelationSideTracker::Apply(absl::Span<const Triple> added, absl::Span<const Triple> removed,
                                const GraphView& before, const GraphView& after) {
  // The (entity, side, fact) incidences of the change, grouped by entity, each once.
  struct Touch {
    EntityId entity;
    uint32_t side;
    Triple fact;
    bool operator<(const Touch& o) const {
      return std::tie(entity, side, fact) < std::tie(o.entity, o.side, o.fact);
    }
    bool operator==(const Touch& o) const {
      return entity == o.entity && side == o.side && fact == o.fact;
    }
  };
  std::vector<Touch> touches;
  touches.reserve(2 * (added.size() + removed.size()));
  for (absl::Span<const Triple> facts : {added, removed}) {
    for (const Triple& t : facts) {
      touches.push_back({t.head, HeadSide(t.relation), t});
      touches.push_back({t.tail, TailSide(t.relation), t});
    }
  }
  std::sort(touches.begin(), touches.end());
  touches.erase(std::unique(touches.begin(), touches.end()), touches.end());

  std::vector<uint32_t> sides_before, sides_after;
  auto sides_of = [](const SideCounts& counts, std::vector<uint32_t>* sides) {
    sides->clear();
    for (const auto& [side, count] : counts) sides->push_back(side);
  };
  for (size_t begin = 0, end = 0; begin < touches.size(); begin = end) {
    const EntityId e = touches[begin].entity;
    for (end = begin; end < touches.size() && touches[end].entity == e;) ++end;
    auto tracked = hub_sides_.find(e);
    if (tracked != hub_sides_.end()) {
      // A hub: its sides' fact counts change by the facts really added or removed (present
      // after and not before, or the reverse), found in O(log degree) each.
      SideCounts& counts = tracked->second;
      sides_of(counts, &sides_before);
      for (size_t i = begin; i < end; ++i) {
        const Triple& f = touches[i].fact;
        const int change = static_cast<int>(after.HasFact(f.head, f.relation, f.tail)) -
                           static_cast<int>(before.HasFact(f.head, f.relation, f.tail));
        if (change == 0) continue;
        auto at = std::lower_bound(counts.begin(), counts.end(),
                                   std::make_pair(touches[i].side, uint32_t{0}));
        if (at == counts.end() || at->first != touches[i].side) {
          at = counts.insert(at, {touches[i].side, 0});
        }
        at->second += change;
        if (at->second == 0) counts.erase(at);
      }
      sides_of(counts, &sides_after);
      counts_.Update(sides_before, sides_after);
      continue;
    }
    // Otherwise its lists are short (or this is the first change to touch it since it grew):
    // only a side the change touches can come or go, so look those up in both versions, and
    // read every side off the lists only when one did.
    const auto out = after.OutEdges(e), in = after.InEdges(e);
    const bool existed = e < before.num_entities();
    const auto out_before = existed ? before.OutEdges(e) : absl::Span<const Neighbor>();
    const auto in_before = existed ? before.InEdges(e) : absl::Span<const Neighbor>();
    bool changed = false;
    for (size_t i = begin; i < end && !changed; ++i) {
      if (i > begin && touches[i].side == touches[i - 1].side) continue;
      changed = Holds(out_before, in_before, touches[i].side) != Holds(out, in, touches[i].side);
    }
    if (changed) {
      EntitySides(out_before, in_before, &sides_before);
      EntitySides(out, in, &sides_after);
      counts_.Update(sides_before, sides_after);
    }
    if (out.size() + in.size() > kTrackedDegree) hub_sides_[e] = CountSides(out, in);
  }
  return counts_.changed();
}

void RelationSideTracker::Reset(const GraphView& graph) {
  counts_ = RelationSideCounts();
  hub_sides_.clear();
  std::vector<uint32_t> sides;
  for (EntityId e = 0; e < graph.num_entities(); ++e) {
    const auto out = graph.OutEdges(e), in = graph.InEdges(e);
    if (out.empty() && in.empty()) continue;
    EntitySides(out, in, &sides);
    counts_.Update({}, sides);
    if (out.size() + in.size() > kTrackedDegree) hub_sides_[e] = CountSides(out, in);
  }
}

RelationSideTracker::SideCounts RelationSideTracker::CountSides(absl::Span<const Neighbor> out,
                                                                absl::Span<const Neighbor> in) {
  SideCounts counts;
  counts.reserve(out.size() + in.size());
  for (const Neighbor& n : out) counts.emplace_back(HeadSide(n.relation), 1);
  for (const Neighbor& n : in) counts.emplace_back(TailSide(n.relation), 1);
  std::sort(counts.begin(), counts.end());
  size_t kept = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (kept > 0 && counts[kept - 1].first == counts[i].first) {
      ++counts[kept - 1].second;
    } else {
      counts[kept++] = counts[i];
    }
  }
  counts.resize(kept);
  return counts;
}

}  // namespace grail
