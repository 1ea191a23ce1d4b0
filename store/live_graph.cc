#include "store/live_graph.h"

#include <algorithm>
#include <cassert>
#include <future>
#include <system_error>
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

uint32_t GraphSnapshot::num_live_relations() const {
  return static_cast<uint32_t>(std::count_if(relation_facts_->begin(), relation_facts_->end(),
                                             [](uint64_t n) { return n > 0; }));
}

std::vector<std::string> GraphSnapshot::LiveRelationNames() const {
  std::vector<std::string> names;
  for (RelationId r = 0; r < relation_facts_->size(); ++r) {
    if ((*relation_facts_)[r] > 0) names.push_back(relations_->Name(r));
  }
  return names;
}

LiveGraph::LiveGraph(bool relation_sides)
    : entity_names_(std::make_shared<NameTable>()), relation_sides_(relation_sides) {
  auto empty = std::shared_ptr<GraphSnapshot>(new GraphSnapshot());
  empty->adjacency_ = adjacency_.Latest();
  empty->entity_names_ = entity_names_;
  empty->relations_ = std::make_shared<const Vocabulary>();
  empty->relation_facts_ = std::make_shared<const std::vector<uint64_t>>();
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
  return Publish(delta, adjacency_.Prepare(delta.facts, delta.removed_facts));
}

absl::StatusOr<uint64_t> LiveGraph::ApplyAlongside(const GraphDelta& delta,
                                                   absl::FunctionRef<absl::Status()> alongside) {
  if (delta.facts.size() + delta.removed_facts.size() >= kConcurrentFacts) {
    std::future<AdjacencyIndex::Prepared> lists;
    try {
      lists = std::async(std::launch::async,
                         [&] { return adjacency_.Prepare(delta.facts, delta.removed_facts); });
    } catch (const std::system_error&) {
      // No thread to be had: one after the other, below.
    }
    if (lists.valid()) {
      const absl::Status written = alongside();
      AdjacencyIndex::Prepared prepared = lists.get();
      if (!written.ok()) {
        adjacency_.Abort(std::move(prepared));
        return written;
      }
      return Publish(delta, std::move(prepared));
    }
  }
  if (absl::Status written = alongside(); !written.ok()) return written;
  return Apply(delta);
}

uint64_t LiveGraph::Publish(const GraphDelta& delta, AdjacencyIndex::Prepared prepared) {
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

  if (delta.new_relations.empty() && delta.facts.empty() && delta.removed_facts.empty()) {
    next->relation_facts_ = base->relation_facts_;
  } else {
    auto counts = std::make_shared<std::vector<uint64_t>>(*base->relation_facts_);
    counts->resize(next->relations_->size(), 0);
    for (const Triple& t : delta.facts) ++(*counts)[t.relation];
    for (const Triple& t : delta.removed_facts) --(*counts)[t.relation];
    next->relation_facts_ = std::move(counts);
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

  const uint64_t added = prepared.added(), removed = prepared.removed();
  next->adjacency_ = adjacency_.Commit(std::move(prepared));
  // An entity whose last self-loop went leaves the list.
  for (const Triple& t : delta.removed_facts) {
    if (t.head != t.tail) continue;
    const auto out = next->adjacency_.OutEdges(t.head);
    const bool still_looped =
        std::any_of(out.begin(), out.end(), [&](const Neighbor& n) { return n.entity == t.head; });
    auto at = std::lower_bound(next->self_loops_->begin(), next->self_loops_->end(), t.head);
    if (still_looped || at == next->self_loops_->end() || *at != t.head) continue;
    auto shrunk = std::make_shared<std::vector<EntityId>>(*next->self_loops_);
    shrunk->erase(shrunk->begin() + (at - next->self_loops_->begin()));
    next->self_loops_ = std::move(shrunk);
  }
  next->num_facts_ = base->num_facts_ + added - removed;
  // The pair list is shared until a chunk makes two relation sides meet or part. A whole
  // graph at once (a store's open, a bulk load into an empty store) is read off its lists.
  if (relation_sides_ && base->num_facts_ == 0 && delta.removed_facts.empty() &&
      !delta.facts.empty()) {
    side_tracker_.Reset(*next);
    next->side_pairs_ = std::make_shared<const RelationSidePairs>(side_tracker_.Pairs());
  } else {
    next->side_pairs_ =
        relation_sides_ && side_tracker_.Apply(delta.facts, delta.removed_facts, *base, *next)
            ? std::make_shared<const RelationSidePairs>(side_tracker_.Pairs())
            : base->side_pairs_;
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

std::shared_ptr<const GraphSnapshot> LiveGraph::NamesSnapshot() const {
  auto names = std::shared_ptr<GraphSnapshot>(new GraphSnapshot(*Snapshot()));
  names->adjacency_ = AdjacencyIndex::Version();
  return names;
}

void LiveGraph::TrackRelationSides(bool on) {
  if (on == relation_sides_) return;
  const std::shared_ptr<const GraphSnapshot> base = Snapshot();
  auto next = std::shared_ptr<GraphSnapshot>(new GraphSnapshot(*base));
  if (on) {
    side_tracker_.Reset(*base);
    next->side_pairs_ = std::make_shared<const RelationSidePairs>(side_tracker_.Pairs());
  } else {
    side_tracker_ = RelationSideTracker();  // its memory goes now
    next->side_pairs_ = std::make_shared<const RelationSidePairs>();
  }
  relation_sides_ = on;
  std::shared_ptr<const GraphSnapshot> previous = std::move(next);
  std::lock_guard<std::mutex> lock(mu_);
  std::swap(current_, previous);
}

std::optional<size_t> LiveGraph::FirstFactPastRelationPairLimit(absl::Span<const Triple> facts,
                                                                uint64_t limit) const {
  if (!relation_sides_) return std::nullopt;
  return side_tracker_.FirstFactPastPairLimit(facts, *Snapshot(), limit);
}

LiveGraph::MemoryUsage LiveGraph::ApproximateMemoryUsage() const {
  const std::shared_ptr<const GraphSnapshot> latest = Snapshot();
  MemoryUsage usage;
  usage.adjacency_bytes = adjacency_.ApproximateMemoryUsage().bytes;
  usage.entity_name_bytes = entity_names_->ApproximateMemoryUsage();
  for (const std::string& name : latest->relation_names()) {
    usage.relation_name_bytes += sizeof(std::string) + name.capacity();
  }
  return usage;
}

}  // namespace grail
