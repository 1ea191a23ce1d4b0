#include "store/adjacency_index.h"

#include <algorithm>
#include <atomic>
#include <cassert>
#include <deque>
#include <limits>
#include <mutex>
#include <new>
#include <set>
#include <utility>
#include <vector>

namespace grail {
namespace {

// One entity's out- and in-neighbours as of version `since`, immutable once published, in a
// single allocation: a 16-byte header; then, for a list that replaced one, a pointer to it
// (`older`: what readers of earlier versions take); then the out list and the in list. A list
// that replaced none (most of a loaded graph's) costs what the header and its edges do: with
// malloc's 16-byte granules, as much as a 12-byte header would.
class EdgeList {
 public:
  // `capacity` neighbours follow the header; the caller writes them and set_sizes().
  static EdgeList* Allocate(uint64_t since, const EdgeList* older, size_t capacity) {
    const size_t link = older != nullptr ? sizeof(EdgeList*) : 0;
    void* memory = ::operator new(sizeof(EdgeList) + link + capacity * sizeof(Neighbor));
    auto* list = new (memory) EdgeList(since, older != nullptr);
    if (older != nullptr) *reinterpret_cast<const EdgeList**>(list + 1) = older;
    return list;
  }
  static void Destroy(const EdgeList* list) {
    list->~EdgeList();
    ::operator delete(const_cast<EdgeList*>(list));
  }

  uint64_t since() const { return since_ & ~kHasOlder; }
  const EdgeList* older() const {
    return (since_ & kHasOlder) != 0 ? *reinterpret_cast<const EdgeList* const*>(this + 1)
                                     : nullptr;
  }
  absl::Span<const Neighbor> out() const { return {edges(), num_out_}; }
  absl::Span<const Neighbor> in() const { return {edges() + num_out_, num_in_}; }
  size_t bytes() const {
    return reinterpret_cast<const char*>(edges() + num_out_ + num_in_) -
           reinterpret_cast<const char*>(this);
  }

  Neighbor* mutable_edges() { return const_cast<Neighbor*>(edges()); }
  void set_sizes(size_t num_out, size_t num_in) {
    num_out_ = static_cast<uint32_t>(num_out);
    num_in_ = static_cast<uint32_t>(num_in);
  }

 private:
  static constexpr uint64_t kHasOlder = uint64_t{1} << 63;

  EdgeList(uint64_t since, bool has_older) : since_(since | (has_older ? kHasOlder : 0)) {}
  const Neighbor* edges() const {
    const char* after = reinterpret_cast<const char*>(this + 1);
    return reinterpret_cast<const Neighbor*>((since_ & kHasOlder) != 0 ? after + sizeof(EdgeList*)
                                                                       : after);
  }

  const uint64_t since_;  // the version; the top bit says whether `older` follows
  uint32_t num_out_ = 0;
  uint32_t num_in_ = 0;
};
static_assert(sizeof(EdgeList) == 16, "a list's header is 16 bytes");
static_assert(sizeof(EdgeList) % alignof(EdgeList*) == 0, "the link follows the header aligned");
static_assert(sizeof(EdgeList*) % alignof(Neighbor) == 0, "edges follow unpadded");

using Slot = std::atomic<const EdgeList*>;
using Changes = std::vector<std::pair<EntityId, Neighbor>>;

constexpr int kSegmentBits = 16;
constexpr size_t kSegmentSlots = size_t{1} << kSegmentBits;
constexpr size_t kSegments = size_t{1} << (32 - kSegmentBits);

// Writes the sorted union of `old` and the neighbours of [begin, end) (sorted, distinct) to
// `out`; returns the end.
Neighbor* MergeTo(absl::Span<const Neighbor> old, Changes::const_iterator begin,
                  Changes::const_iterator end, Neighbor* out) {
  size_t a = 0;
  while (a < old.size() && begin != end) {
    if (old[a] < begin->second) {
      *out++ = old[a++];
    } else if (begin->second < old[a]) {
      *out++ = (begin++)->second;
    } else {
      *out++ = old[a++];
      ++begin;
    }
  }
  out = std::copy(old.begin() + a, old.end(), out);
  for (; begin != end; ++begin) *out++ = begin->second;
  return out;
}

// Writes `list` without the neighbours of [begin, end) (sorted, distinct) to `out`; returns
// the end. `out` may be `list.data()`: it never runs ahead of the read position.
Neighbor* SubtractTo(absl::Span<const Neighbor> list, Changes::const_iterator begin,
                     Changes::const_iterator end, Neighbor* out) {
  for (const Neighbor& n : list) {
    while (begin != end && begin->second < n) ++begin;
    if (begin != end && begin->second == n) continue;
    *out++ = n;
  }
  return out;
}

// The changes' run for entity `e` starting at `it`.
Changes::const_iterator RunEnd(const Changes& changes, Changes::const_iterator it, EntityId e) {
  while (it != changes.cend() && it->first == e) ++it;
  return it;
}

// `facts` seen from each end, sorted and without repeats, so that each entity's changes form
// one run in adjacency order.
void SplitByEnd(absl::Span<const Triple> facts, Changes* outs, Changes* ins) {
  outs->reserve(facts.size());
  ins->reserve(facts.size());
  for (const Triple& t : facts) {
    outs->push_back({t.head, Neighbor{t.tail, t.relation}});
    ins->push_back({t.tail, Neighbor{t.head, t.relation}});
  }
  for (Changes* side : {outs, ins}) {
    std::sort(side->begin(), side->end());
    side->erase(std::unique(side->begin(), side->end()), side->end());
  }
}

}  // namespace

struct AdjacencyIndex::State {
  // A version's replaced lists, freed once no earlier version is held.
  struct Retired {
    uint64_t version = 0;
    std::vector<const EdgeList*> lists;
    uint64_t bytes = 0;
  };

  State() : segments(new std::atomic<Slot*>[kSegments]) {
    for (size_t i = 0; i < kSegments; ++i) segments[i].store(nullptr, std::memory_order_relaxed);
  }
  ~State() {
    // Every list is either a slot's newest or retired and not yet freed.
    for (size_t i = 0; i < kSegments; ++i) {
      Slot* segment = segments[i].load(std::memory_order_relaxed);
      if (segment == nullptr) continue;
      for (size_t j = 0; j < kSegmentSlots; ++j) {
        if (const EdgeList* list = segment[j].load(std::memory_order_relaxed)) {
          EdgeList::Destroy(list);
        }
      }
      delete[] segment;
    }
    for (const Retired& batch : retired) {
      for (const EdgeList* list : batch.lists) EdgeList::Destroy(list);
    }
  }

  // The list readers of `version` take for `e`, or null.
  const EdgeList* Find(EntityId e, uint64_t version) const {
    const Slot* segment = segments[e >> kSegmentBits].load(std::memory_order_acquire);
    if (segment == nullptr) return nullptr;
    const EdgeList* list = segment[e & (kSegmentSlots - 1)].load(std::memory_order_acquire);
    while (list != nullptr && list->since() > version) list = list->older();
    return list;
  }

  // The writer's: e's slot, its segment made if need be.
  Slot& WritableSlot(EntityId e) {
    std::atomic<Slot*>& entry = segments[e >> kSegmentBits];
    Slot* segment = entry.load(std::memory_order_relaxed);
    if (segment == nullptr) {
      segment = new Slot[kSegmentSlots];
      for (size_t j = 0; j < kSegmentSlots; ++j)
        segment[j].store(nullptr, std::memory_order_relaxed);
      entry.store(segment, std::memory_order_release);
    }
    return segment[e & (kSegmentSlots - 1)];
  }

  void Register(uint64_t version, Retired replaced) {
    std::lock_guard<std::mutex> lock(mu);
    held.insert(version);
    AddRetired(std::move(replaced));
  }

  // Lists read only by versions before `lists.version`, none of them the latest.
  void Retire(Retired lists) {
    std::lock_guard<std::mutex> lock(mu);
    AddRetired(std::move(lists));
  }

  void AddRetired(Retired lists) {
    retained_bytes += lists.bytes;
    if (!lists.lists.empty()) retired.push_back(std::move(lists));
  }

  // `version` is no longer held: frees what no held version reads any more.
  void Unregister(uint64_t version) {
    std::vector<Retired> freeable;
    {
      std::lock_guard<std::mutex> lock(mu);
      held.erase(version);
      const uint64_t oldest = held.empty() ? std::numeric_limits<uint64_t>::max() : *held.begin();
      // A list replaced in version t is read only by versions before t.
      while (!retired.empty() && retired.front().version <= oldest) {
        retained_bytes -= retired.front().bytes;
        freeable.push_back(std::move(retired.front()));
        retired.pop_front();
      }
    }
    for (const Retired& batch : freeable) {
      for (const EdgeList* list : batch.lists) EdgeList::Destroy(list);
    }
  }

  std::unique_ptr<std::atomic<Slot*>[]> segments;

  std::mutex mu;
  std::set<uint64_t> held;      // guarded by mu
  std::deque<Retired> retired;  // guarded by mu; by version, ascending
  uint64_t retained_bytes = 0;  // guarded by mu
};

struct AdjacencyIndex::Version::Pin {
  Pin(std::shared_ptr<State> state, uint64_t version) : state(std::move(state)), version(version) {}
  ~Pin() { state->Unregister(version); }
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;

  const std::shared_ptr<State> state;
  const uint64_t version;
};

absl::Span<const Neighbor> AdjacencyIndex::Version::OutEdges(EntityId e) const {
  if (pin_ == nullptr) return {};
  const EdgeList* list = pin_->state->Find(e, pin_->version);
  return list != nullptr ? list->out() : absl::Span<const Neighbor>();
}

absl::Span<const Neighbor> AdjacencyIndex::Version::InEdges(EntityId e) const {
  if (pin_ == nullptr) return {};
  const EdgeList* list = pin_->state->Find(e, pin_->version);
  return list != nullptr ? list->in() : absl::Span<const Neighbor>();
}

AdjacencyIndex::AdjacencyIndex() : state_(std::make_shared<State>()) {
  state_->Register(0, State::Retired());
  latest_.pin_ = std::make_shared<const Version::Pin>(state_, 0);
}

AdjacencyIndex::~AdjacencyIndex() = default;

struct AdjacencyIndex::Prepared::Lists {
  uint64_t version = 0;
  // The slots written and the lists they held before (null for an entity's first).
  std::vector<std::pair<Slot*, const EdgeList*>> written;
  uint64_t added = 0, removed = 0;
};

AdjacencyIndex::Prepared::Prepared(std::unique_ptr<Lists> lists) : lists_(std::move(lists)) {}
AdjacencyIndex::Prepared::Prepared(Prepared&&) noexcept = default;
AdjacencyIndex::Prepared& AdjacencyIndex::Prepared::operator=(Prepared&&) noexcept = default;
AdjacencyIndex::Prepared::~Prepared() {
  assert(lists_ == nullptr && "neither committed nor aborted");
}
uint64_t AdjacencyIndex::Prepared::added() const { return lists_->added; }
uint64_t AdjacencyIndex::Prepared::removed() const { return lists_->removed; }

AdjacencyIndex::Prepared AdjacencyIndex::Prepare(absl::Span<const Triple> added,
                                                 absl::Span<const Triple> removed) {
  Changes add_outs, add_ins, remove_outs, remove_ins;
  SplitByEnd(added, &add_outs, &add_ins);
  SplitByEnd(removed, &remove_outs, &remove_ins);

  auto prepared = std::make_unique<Prepared::Lists>();
  const uint64_t version = latest_.pin_->version + 1;
  prepared->version = version;
  auto ao = add_outs.cbegin(), ai = add_ins.cbegin();
  auto ro = remove_outs.cbegin(), ri = remove_ins.cbegin();
  for (;;) {
    // The next entity any of the four runs touches.
    EntityId e = std::numeric_limits<EntityId>::max();
    bool any = false;
    for (auto [it, end] : {std::pair(ao, add_outs.cend()), std::pair(ai, add_ins.cend()),
                           std::pair(ro, remove_outs.cend()), std::pair(ri, remove_ins.cend())}) {
      if (it != end) {
        e = std::min(e, it->first);
        any = true;
      }
    }
    if (!any) break;
    const auto ao_end = RunEnd(add_outs, ao, e), ai_end = RunEnd(add_ins, ai, e);
    const auto ro_end = RunEnd(remove_outs, ro, e), ri_end = RunEnd(remove_ins, ri, e);

    Slot& slot = state_->WritableSlot(e);
    const EdgeList* old = slot.load(std::memory_order_relaxed);
    const absl::Span<const Neighbor> old_out = old ? old->out() : absl::Span<const Neighbor>();
    const absl::Span<const Neighbor> old_in = old ? old->in() : absl::Span<const Neighbor>();
    EdgeList* list = EdgeList::Allocate(
        version, old, old_out.size() + (ao_end - ao) + old_in.size() + (ai_end - ai));
    Neighbor* const edges = list->mutable_edges();
    // Out list, then the in list right after it; a removal compacts the merged list in place.
    Neighbor* out_end = MergeTo(old_out, ao, ao_end, edges);
    const size_t merged_out = out_end - edges;
    out_end = SubtractTo({edges, merged_out}, ro, ro_end, edges);
    Neighbor* in_end = MergeTo(old_in, ai, ai_end, out_end);
    const size_t merged_in = in_end - out_end;
    in_end = SubtractTo({out_end, merged_in}, ri, ri_end, out_end);
    const size_t num_out = out_end - edges, num_in = in_end - out_end;
    list->set_sizes(num_out, num_in);
    ao = ao_end, ai = ai_end, ro = ro_end, ri = ri_end;
    // Every fact has exactly one out entry, so the out list's changes count facts once.
    prepared->added += merged_out - old_out.size();
    prepared->removed += merged_out - num_out;
    const bool unchanged = merged_out == old_out.size() && num_out == merged_out &&
                           merged_in == old_in.size() && num_in == merged_in;
    if (unchanged || (old == nullptr && num_out == 0 && num_in == 0)) {
      EdgeList::Destroy(list);
      continue;
    }
    prepared->written.emplace_back(&slot, old);
    // Release: a reader that finds the list sees it filled (and, stamped with a version no
    // held snapshot has, passes over it).
    slot.store(list, std::memory_order_release);
  }
  return Prepared(std::move(prepared));
}

AdjacencyIndex::Version AdjacencyIndex::Commit(Prepared prepared) {
  std::unique_ptr<Prepared::Lists> lists = std::move(prepared.lists_);
  // The lists the version replaced, read from now on only by the versions before it.
  State::Retired replaced;
  replaced.version = lists->version;
  for (const auto& [slot, old] : lists->written) {
    if (old == nullptr) continue;
    replaced.lists.push_back(old);
    replaced.bytes += old->bytes();
  }
  state_->Register(lists->version, std::move(replaced));
  latest_.pin_ = std::make_shared<const Version::Pin>(state_, lists->version);
  return latest_;
}

void AdjacencyIndex::Abort(Prepared prepared) {
  std::unique_ptr<Prepared::Lists> lists = std::move(prepared.lists_);
  // A reader of a held version may be passing over a new list right now: the lists go
  // once no version before theirs is held, like replaced ones. The next version reuses
  // the number, which no one holds.
  State::Retired unused;
  unused.version = lists->version;
  for (const auto& [slot, old] : lists->written) {
    const EdgeList* list = slot->load(std::memory_order_relaxed);
    unused.lists.push_back(list);
    unused.bytes += list->bytes();
    slot->store(old, std::memory_order_release);
  }
  state_->Retire(std::move(unused));
}

AdjacencyIndex::Version AdjacencyIndex::Apply(absl::Span<const Triple> added,
                                              absl::Span<const Triple> removed,
                                              uint64_t* added_count, uint64_t* removed_count) {
  Prepared prepared = Prepare(added, removed);
  if (added_count != nullptr) *added_count = prepared.added();
  if (removed_count != nullptr) *removed_count = prepared.removed();
  return Commit(std::move(prepared));
}

uint64_t AdjacencyIndex::RetainedBytes() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->retained_bytes;
}

AdjacencyIndex::MemoryUsage AdjacencyIndex::ApproximateMemoryUsage() const {
  MemoryUsage usage;
  for (size_t i = 0; i < kSegments; ++i) {
    const Slot* segment = state_->segments[i].load(std::memory_order_acquire);
    if (segment == nullptr) continue;
    usage.slots += kSegmentSlots * sizeof(Slot);
    for (size_t j = 0; j < kSegmentSlots; ++j) {
      const EdgeList* list = segment[j].load(std::memory_order_acquire);
      if (list == nullptr) continue;
      ++usage.lists;
      usage.edge_lists += list->bytes();
    }
  }
  usage.retained = RetainedBytes();
  usage.bytes = usage.slots + usage.edge_lists;
  return usage;
}

}  // namespace grail
