#include "store/adjacency_tree.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace grail {

// One entity's out- and in-neighbours, immutable once built, in a single allocation: a
// 12-byte header followed by the out list and then the in list. Reference counted by hand
// (EdgeListRef) because a std::shared_ptr to two std::vectors would cost three allocations
// and ~100 bytes of headers per entity, more than the ~2 x 8 bytes per fact of the lists
// themselves on typical knowledge graphs.
class EdgeList {
 public:
  // Returns a list with one reference, owned by the caller.
  static const EdgeList* Create(absl::Span<const Neighbor> out, absl::Span<const Neighbor> in) {
    void* memory = ::operator new(sizeof(EdgeList) + (out.size() + in.size()) * sizeof(Neighbor));
    auto* list =
        new (memory) EdgeList(static_cast<uint32_t>(out.size()), static_cast<uint32_t>(in.size()));
    Neighbor* edges = reinterpret_cast<Neighbor*>(list + 1);
    std::uninitialized_copy(out.begin(), out.end(), edges);
    std::uninitialized_copy(in.begin(), in.end(), edges + out.size());
    return list;
  }

  absl::Span<const Neighbor> out() const { return {edges(), num_out_}; }
  absl::Span<const Neighbor> in() const { return {edges() + num_out_, num_in_}; }
  size_t bytes() const { return sizeof(EdgeList) + (num_out_ + num_in_) * sizeof(Neighbor); }

  void Ref() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  // The acq_rel decrement orders every reader's last use before the deallocation.
  void Unref() const {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      this->~EdgeList();
      ::operator delete(const_cast<EdgeList*>(this));
    }
  }

 private:
  EdgeList(uint32_t num_out, uint32_t num_in) : num_out_(num_out), num_in_(num_in) {}
  const Neighbor* edges() const { return reinterpret_cast<const Neighbor*>(this + 1); }

  mutable std::atomic<uint32_t> refs_{1};
  const uint32_t num_out_;
  const uint32_t num_in_;
};
static_assert(sizeof(EdgeList) % alignof(Neighbor) == 0, "edges follow the header unpadded");

namespace {

constexpr uint32_t kSlotMask = AdjacencyTree::kFanOut - 1;

// Owning handle on one EdgeList reference.
class EdgeListRef {
 public:
  EdgeListRef() = default;
  // Adopts the reference the caller holds.
  explicit EdgeListRef(const EdgeList* adopted) : list_(adopted) {}
  EdgeListRef(const EdgeListRef& other) : list_(other.list_) {
    if (list_ != nullptr) list_->Ref();
  }
  EdgeListRef(EdgeListRef&& other) noexcept : list_(std::exchange(other.list_, nullptr)) {}
  EdgeListRef& operator=(EdgeListRef other) noexcept {
    std::swap(list_, other.list_);
    return *this;
  }
  ~EdgeListRef() {
    if (list_ != nullptr) list_->Unref();
  }
  const EdgeList* get() const { return list_; }

 private:
  const EdgeList* list_ = nullptr;
};

using NodePtr = std::shared_ptr<const AdjacencyTree::Node>;

}  // namespace

// Empty base so that inner nodes and leaves can share one pointer type; a node's kind
// follows from its level, so no virtual dispatch is needed. make_shared records the
// concrete type's deleter, so dropping a NodePtr destroys the right type.
struct AdjacencyTree::Node {};

namespace {

struct InnerNode : AdjacencyTree::Node {
  std::array<NodePtr, AdjacencyTree::kFanOut> children;
};

struct LeafNode : AdjacencyTree::Node {
  std::array<EdgeListRef, AdjacencyTree::kFanOut> lists;
};

using Update = std::pair<EntityId, EdgeListRef>;
using UpdateIt = std::vector<Update>::iterator;

// Whether a tree of `height` levels has a slot for id `e`.
bool Covers(int height, EntityId e) {
  const int bits = AdjacencyTree::kFanOutBits * height;
  return bits >= 32 || (e >> bits) == 0;
}

// Returns a copy of `old` (a node at `level`, or null for an empty subtree) with the
// updates [begin, end) installed; they are sorted by id and all fall under this node.
NodePtr Rebuild(const AdjacencyTree::Node* old, int level, UpdateIt begin, UpdateIt end) {
  if (level == 1) {
    auto leaf = old != nullptr ? std::make_shared<LeafNode>(*static_cast<const LeafNode*>(old))
                               : std::make_shared<LeafNode>();
    for (UpdateIt it = begin; it != end; ++it) {
      leaf->lists[it->first & kSlotMask] = std::move(it->second);
    }
    return leaf;
  }
  auto inner = old != nullptr ? std::make_shared<InnerNode>(*static_cast<const InnerNode*>(old))
                              : std::make_shared<InnerNode>();
  const int shift = AdjacencyTree::kFanOutBits * (level - 1);
  for (UpdateIt it = begin; it != end;) {
    const uint32_t slot = (it->first >> shift) & kSlotMask;
    UpdateIt run_end = std::find_if(
        it, end, [&](const Update& u) { return ((u.first >> shift) & kSlotMask) != slot; });
    inner->children[slot] = Rebuild(inner->children[slot].get(), level - 1, it, run_end);
    it = run_end;
  }
  return inner;
}

// Writes the sorted union of `old` and the neighbours of [begin, end) (sorted, distinct)
// into `out`.
void MergeInto(absl::Span<const Neighbor> old,
               std::vector<std::pair<EntityId, Neighbor>>::const_iterator begin,
               std::vector<std::pair<EntityId, Neighbor>>::const_iterator end,
               std::vector<Neighbor>* out) {
  out->clear();
  out->reserve(old.size() + (end - begin));
  size_t a = 0;
  while (a < old.size() && begin != end) {
    if (old[a] < begin->second) {
      out->push_back(old[a++]);
    } else if (begin->second < old[a]) {
      out->push_back((begin++)->second);
    } else {
      out->push_back(old[a++]);
      ++begin;
    }
  }
  out->insert(out->end(), old.begin() + a, old.end());
  for (; begin != end; ++begin) out->push_back(begin->second);
}

// Writes `old` without the neighbours of [begin, end) (sorted, distinct) into `out`.
void SubtractInto(absl::Span<const Neighbor> old,
                  std::vector<std::pair<EntityId, Neighbor>>::const_iterator begin,
                  std::vector<std::pair<EntityId, Neighbor>>::const_iterator end,
                  std::vector<Neighbor>* out) {
  out->clear();
  out->reserve(old.size());
  for (const Neighbor& n : old) {
    while (begin != end && begin->second < n) ++begin;
    if (begin != end && begin->second == n) continue;
    out->push_back(n);
  }
}

void AddUsage(const AdjacencyTree::Node* node, int level, AdjacencyTree::MemoryUsage* usage) {
  if (node == nullptr) return;
  if (level == 1) {
    ++usage->leaf_nodes;
    usage->bytes += sizeof(LeafNode);
    for (const EdgeListRef& list : static_cast<const LeafNode*>(node)->lists) {
      if (list.get() == nullptr) continue;
      ++usage->edge_lists;
      usage->bytes += list.get()->bytes();
    }
    return;
  }
  ++usage->inner_nodes;
  usage->bytes += sizeof(InnerNode);
  for (const NodePtr& child : static_cast<const InnerNode*>(node)->children) {
    AddUsage(child.get(), level - 1, usage);
  }
}

}  // namespace

const EdgeList* AdjacencyTree::Find(EntityId e) const {
  if (height_ == 0 || !Covers(height_, e)) return nullptr;
  const Node* node = root_.get();
  for (int level = height_; level > 1 && node != nullptr; --level) {
    const uint32_t slot = (e >> (kFanOutBits * (level - 1))) & kSlotMask;
    node = static_cast<const InnerNode*>(node)->children[slot].get();
  }
  if (node == nullptr) return nullptr;
  return static_cast<const LeafNode*>(node)->lists[e & kSlotMask].get();
}

absl::Span<const Neighbor> AdjacencyTree::OutEdges(EntityId e) const {
  const EdgeList* list = Find(e);
  return list != nullptr ? list->out() : absl::Span<const Neighbor>();
}

absl::Span<const Neighbor> AdjacencyTree::InEdges(EntityId e) const {
  const EdgeList* list = Find(e);
  return list != nullptr ? list->in() : absl::Span<const Neighbor>();
}

AdjacencyTree AdjacencyTree::WithFacts(absl::Span<const Triple> facts, uint64_t* added) const {
  return WithChangedFacts(facts, /*remove=*/false, added);
}

AdjacencyTree AdjacencyTree::WithoutFacts(absl::Span<const Triple> facts, uint64_t* removed) const {
  return WithChangedFacts(facts, /*remove=*/true, removed);
}

AdjacencyTree AdjacencyTree::WithChangedFacts(absl::Span<const Triple> facts, bool remove,
                                              uint64_t* changed) const {
  // The facts seen from each end, sorted so that every touched entity's changed edges form
  // one contiguous run already in adjacency order.
  std::vector<std::pair<EntityId, Neighbor>> outs, ins;
  outs.reserve(facts.size());
  ins.reserve(facts.size());
  for (const Triple& t : facts) {
    outs.push_back({t.head, Neighbor{t.tail, t.relation}});
    ins.push_back({t.tail, Neighbor{t.head, t.relation}});
  }
  for (auto* side : {&outs, &ins}) {
    std::sort(side->begin(), side->end());
    side->erase(std::unique(side->begin(), side->end()), side->end());
  }

  // One new EdgeList per touched entity, in id order (none for an entity left without
  // edges).
  std::vector<Update> updates;
  uint64_t changed_facts = 0;
  std::vector<Neighbor> merged_out, merged_in;
  auto o = outs.cbegin(), i = ins.cbegin();
  while (o != outs.cend() || i != ins.cend()) {
    const EntityId e = o == outs.cend()  ? i->first
                       : i == ins.cend() ? o->first
                                         : std::min(o->first, i->first);
    auto o_end = o, i_end = i;
    while (o_end != outs.cend() && o_end->first == e) ++o_end;
    while (i_end != ins.cend() && i_end->first == e) ++i_end;
    const EdgeList* old = Find(e);
    const absl::Span<const Neighbor> old_out = old ? old->out() : absl::Span<const Neighbor>();
    const absl::Span<const Neighbor> old_in = old ? old->in() : absl::Span<const Neighbor>();
    if (remove) {
      SubtractInto(old_out, o, o_end, &merged_out);
      SubtractInto(old_in, i, i_end, &merged_in);
    } else {
      MergeInto(old_out, o, o_end, &merged_out);
      MergeInto(old_in, i, i_end, &merged_in);
    }
    o = o_end;
    i = i_end;
    if (merged_out.size() == old_out.size() && merged_in.size() == old_in.size()) continue;
    // Every fact has exactly one out entry, so the out list's change counts facts once.
    changed_facts +=
        remove ? old_out.size() - merged_out.size() : merged_out.size() - old_out.size();
    updates.emplace_back(e, merged_out.empty() && merged_in.empty()
                                ? EdgeListRef()
                                : EdgeListRef(EdgeList::Create(merged_out, merged_in)));
  }
  if (changed != nullptr) *changed = changed_facts;
  if (updates.empty()) return *this;

  AdjacencyTree result = *this;
  const EntityId max_id = updates.back().first;
  while (result.height_ == 0 || !Covers(result.height_, max_id)) {
    if (result.height_ > 0) {
      auto root = std::make_shared<InnerNode>();
      root->children[0] = std::move(result.root_);
      result.root_ = std::move(root);
    }
    ++result.height_;
  }
  result.root_ = Rebuild(result.root_.get(), result.height_, updates.begin(), updates.end());
  return result;
}

AdjacencyTree::MemoryUsage AdjacencyTree::ApproximateMemoryUsage() const {
  MemoryUsage usage;
  AddUsage(root_.get(), height_, &usage);
  return usage;
}

}  // namespace grail
