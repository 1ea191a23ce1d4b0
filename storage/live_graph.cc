#include "storage/live_graph.h"

#include <algorithm>
#include <cassert>
#include <tuple>
#include <utility>

namespace grail {

std::optional<EntityId> GraphSnapshot::FindEntityIncludingRemoved(absl::string_view name) const {
  std::optional<uint32_t> id = entity_names_->Find(name);
  // The table is shared with later versions: an id beyond this version is not here yet.
  if (!id.has_value() || *id >= num_entities_) return std::nullopt;
  return id;
}

std::optional<EntityId> GraphSnapshot::FindEntity(absl::string_view name) const {
  std::optional<EntityId> id = FindEntityIncludingRemoved(name);
  if (id.has_value() && IsRemoved(*id)) return std::nullopt;
  return id;
}

LiveGraph::LiveGraph(bool relation_sides)
    : entity_names_(std::make_shared<NameTable>()), relation_sides_(relation_sides) {
  auto empty = std::shared_ptr<GraphSnapshot>(new GraphSnapshot());
  empty->entity_names_ = entity_names_;
  empty->relations_ = std::make_shared<const Vocabulary>();
  empty->self_loops_ = std::make_shared<const std::vector<EntityId>>();
  empty->removed_ = std::make_shared<const std::vector<EntityId>>();
  empty->side_pairs_ = std::make_shared<const RelationSidePairs>();
  current_ = std::move(empty);
}

std::shared_ptr<const GraphSnapshot> LiveGraph::Snapshot() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

uint64_t LiveGraph::Apply(const GraphDelta& delta) {
  const std::shared_ptr<const GraphSnapshot> base = Snapshot();
  auto next = std::shared_ptr<GraphSnapshot>(new GraphSnapshot());
  next->sequence_ = delta.sequence;
  next->entity_names_ = entity_names_;

  // New names are appended before the version that owns them is published; older
  // versions hide them by their entity count.
  for (const std::string& name : delta.new_entities) {
    assert(!entity_names_->Find(name).has_value());
    entity_names_->Append(name);
  }
  next->num_entities_ = base->num_entities_ + static_cast<uint32_t>(delta.new_entities.size());

  if (delta.new_relations.empty()) {
    next->relations_ = base->relations_;
  } else {
    std::vector<std::string> names = base->relations_->names();
    names.insert(names.end(), delta.new_relations.begin(), delta.new_relations.end());
    next->relations_ = std::make_shared<const Vocabulary>(names);
  }

  next->self_loops_ = base->self_loops_;
  for (const Triple& t : delta.facts) {
    if (t.head != t.tail ||
        std::binary_search(next->self_loops_->begin(), next->self_loops_->end(), t.head)) {
      continue;
    }
    auto grown = std::make_shared<std::vector<EntityId>>(*next->self_loops_);
    grown->insert(std::upper_bound(grown->begin(), grown->end(), t.head), t.head);
    next->self_loops_ = std::move(grown);
  }

  uint64_t added = 0, removed = 0;
  next->adjacency_ = base->adjacency_.WithFacts(delta.facts, &added);
  if (!delta.removed_facts.empty()) {
    next->adjacency_ = next->adjacency_.WithoutFacts(delta.removed_facts, &removed);
    // An entity whose last self-loop went leaves the list.
    for (const Triple& t : delta.removed_facts) {
      if (t.head != t.tail) continue;
      const auto out = next->adjacency_.OutEdges(t.head);
      const bool still_looped = std::any_of(out.begin(), out.end(),
                                            [&](const Neighbor& n) { return n.entity == t.head; });
      auto at = std::lower_bound(next->self_loops_->begin(), next->self_loops_->end(), t.head);
      if (still_looped || at == next->self_loops_->end() || *at != t.head) continue;
      auto shrunk = std::make_shared<std::vector<EntityId>>(*next->self_loops_);
      shrunk->erase(shrunk->begin() + (at - next->self_loops_->begin()));
      next->self_loops_ = std::move(shrunk);
    }
  }
  next->num_facts_ = base->num_facts_ + added - removed;
  if (relation_sides_) {
    UpdateSidePairs(delta, *base, next.get());
  } else {
    next->side_pairs_ = base->side_pairs_;
  }

  next->removed_ = base->removed_;
  if (!delta.removed_entities.empty() || !delta.revived_entities.empty()) {
    auto changed = std::make_shared<std::vector<EntityId>>(*base->removed_);
    changed->insert(changed->end(), delta.removed_entities.begin(), delta.removed_entities.end());
    std::sort(changed->begin(), changed->end());
    changed->erase(std::unique(changed->begin(), changed->end()), changed->end());
    for (EntityId e : delta.revived_entities) {
      auto at = std::lower_bound(changed->begin(), changed->end(), e);
      if (at != changed->end() && *at == e) changed->erase(at);
    }
    next->removed_ = std::move(changed);
  }

  std::shared_ptr<const GraphSnapshot> previous = std::move(next);
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::swap(current_, previous);
  }
  // `previous` (the old version) is released here, outside the lock: if no reader holds
  // it, freeing the nodes it alone owned must not delay readers taking snapshots.
  return added;
}

void LiveGraph::UpdateSidePairs(const GraphDelta& delta, const GraphSnapshot& base,
                                GraphSnapshot* next) {
  // The delta's (entity, side, fact) incidences, grouped by entity, each once.
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
  touches.reserve(2 * (delta.facts.size() + delta.removed_facts.size()));
  for (const auto* facts : {&delta.facts, &delta.removed_facts}) {
    for (const Triple& t : *facts) {
      touches.push_back({t.head, HeadSide(t.relation), t});
      touches.push_back({t.tail, TailSide(t.relation), t});
    }
  }
  std::sort(touches.begin(), touches.end());
  touches.erase(std::unique(touches.begin(), touches.end()), touches.end());

  std::vector<uint32_t> before, after;
  auto sides_of = [](const SideCounts& counts, std::vector<uint32_t>* sides) {
    sides->clear();
    for (const auto& [side, count] : counts) sides->push_back(side);
  };
  for (size_t begin = 0, end = 0; begin < touches.size(); begin = end) {
    const EntityId e = touches[begin].entity;
    for (end = begin; end < touches.size() && touches[end].entity == e;) ++end;
    auto tracked = hub_sides_.find(e);
    if (tracked != hub_sides_.end()) {
      // A hub: its sides' fact counts change by the facts the delta really added or removed
      // (present after and not before, or the reverse), found in O(log degree) each.
      SideCounts& counts = tracked->second;
      sides_of(counts, &before);
      for (size_t i = begin; i < end; ++i) {
        const Triple& f = touches[i].fact;
        const int change = static_cast<int>(next->HasFact(f.head, f.relation, f.tail)) -
                           static_cast<int>(base.HasFact(f.head, f.relation, f.tail));
        if (change == 0) continue;
        auto at = std::lower_bound(counts.begin(), counts.end(),
                                   std::make_pair(touches[i].side, uint32_t{0}));
        if (at == counts.end() || at->first != touches[i].side) {
          at = counts.insert(at, {touches[i].side, 0});
        }
        at->second += change;
        if (at->second == 0) counts.erase(at);
      }
      sides_of(counts, &after);
      side_counts_.Update(before, after);
      continue;
    }
    // Otherwise its lists are short (or this is the first chunk to touch it since it grew):
    // only a side the delta touches can come or go, so look those up in both versions, and
    // read every side off the lists only when one did.
    const auto out = next->adjacency_.OutEdges(e), in = next->adjacency_.InEdges(e);
    const bool existed = e < base.num_entities_;
    const auto base_out = existed ? base.adjacency_.OutEdges(e) : absl::Span<const Neighbor>();
    const auto base_in = existed ? base.adjacency_.InEdges(e) : absl::Span<const Neighbor>();
    auto holds = [](absl::Span<const Neighbor> out, absl::Span<const Neighbor> in, uint32_t side) {
      const absl::Span<const Neighbor> list = side % 2 == 0 ? out : in;
      return std::any_of(list.begin(), list.end(),
                         [&](const Neighbor& n) { return n.relation == side / 2; });
    };
    bool changed = false;
    for (size_t i = begin; i < end && !changed; ++i) {
      if (i > begin && touches[i].side == touches[i - 1].side) continue;
      changed = holds(base_out, base_in, touches[i].side) != holds(out, in, touches[i].side);
    }
    if (changed) {
      EntitySides(base_out, base_in, &before);
      EntitySides(out, in, &after);
      side_counts_.Update(before, after);
    }
    if (out.size() + in.size() > kTrackedDegree) {
      SideCounts& counts = hub_sides_[e];
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
    }
  }
  next->side_pairs_ = side_counts_.changed()
                          ? std::make_shared<const RelationSidePairs>(side_counts_.Pairs())
                          : base.side_pairs_;
}

LiveGraph::MemoryUsage LiveGraph::ApproximateMemoryUsage() const {
  const std::shared_ptr<const GraphSnapshot> latest = Snapshot();
  MemoryUsage usage;
  usage.adjacency_bytes = latest->adjacency_.ApproximateMemoryUsage().bytes;
  usage.entity_name_bytes = entity_names_->ApproximateMemoryUsage();
  for (const std::string& name : latest->relation_names()) {
    usage.relation_name_bytes += sizeof(std::string) + name.capacity();
  }
  return usage;
}

}  // namespace grail
