// The adjacency part of the live graph's in-memory index: each entity's out- and in-edges,
// kept in several versions at once so that readers of older versions are never disturbed
// by a chunk being applied.
//
// Layout: one slot per entity id (a segmented array, so ids may grow without moving it)
// points to that entity's newest edge list; each list points to the one it replaced. A list
// is stamped with the version that made it, so a reader of version V takes the first list
// of the chain stamped V or earlier. Applying a chunk therefore costs one new list per
// entity the chunk touches, written into its slot: no path of a tree is copied and no node
// is reference counted, whatever the graph's size.
//
// Reclamation: a list replaced in version t is read only by readers of versions before t.
// Each version a reader can hold is registered while a Version handle on it lives; a list
// replaced in version t is freed once no version before t is registered, on the thread that
// drops the last such handle (the writer's, in a stream with no other holders). A handle on
// an old version therefore keeps every list replaced since it: hold one for as long as a
// request takes, not for the life of an export (RetainedBytes() says what is kept).
//
// Thread safety: Version handles may be copied, read and dropped on any thread. Apply() is
// the writer's: calls must not overlap.
#ifndef GRAIL_STORE_ADJACENCY_INDEX_H_
#define GRAIL_STORE_ADJACENCY_INDEX_H_

#include <cstdint>
#include <memory>

#include "absl/types/span.h"
#include "graph/graph_view.h"
#include "graph/ids.h"

namespace grail {

class AdjacencyIndex {
 public:
  struct State;  // the lists, slots and registry; defined in the .cc file

  // A reader's handle on one version. Copies share the registration.
  class Version {
   public:
    // No facts, and no index behind it.
    Version() = default;

    // Facts `e --relation--> entity` in this version, sorted by (entity, relation), without
    // duplicates; empty for an entity without facts, ids never seen included. The span stays
    // valid while this handle or a copy of it lives.
    absl::Span<const Neighbor> OutEdges(EntityId e) const;
    // Facts `entity --relation--> e`, sorted by (entity, relation), without duplicates.
    absl::Span<const Neighbor> InEdges(EntityId e) const;

   private:
    friend class AdjacencyIndex;
    struct Pin;
    std::shared_ptr<const Pin> pin_;
  };

  // Bytes from the structures' sizes (allocator overhead not included).
  struct MemoryUsage {
    uint64_t slots = 0;       // the slot array's segments
    uint64_t edge_lists = 0;  // lists the latest version reads
    uint64_t lists = 0;       // how many such lists
    uint64_t retained = 0;    // replaced lists kept for older versions still held
    uint64_t bytes = 0;       // slots + edge_lists
  };

  // An index without facts, at version 0.
  AdjacencyIndex();
  ~AdjacencyIndex();
  AdjacencyIndex(const AdjacencyIndex&) = delete;
  AdjacencyIndex& operator=(const AdjacencyIndex&) = delete;

  // The latest version.
  Version Latest() const { return latest_; }

  // The next version built but not published: its lists are in their slots, where readers
  // of held versions pass over them, until Commit() makes the version or Abort() takes them
  // out. Move-only; at most one at a time.
  class Prepared {
   public:
    Prepared(Prepared&&) noexcept;
    Prepared& operator=(Prepared&&) noexcept;
    ~Prepared();               // requires Commit() or Abort() to have taken it
    uint64_t added() const;    // facts the version adds
    uint64_t removed() const;  // facts it removes

   private:
    friend class AdjacencyIndex;
    struct Lists;
    explicit Prepared(std::unique_ptr<Lists> lists);
    std::unique_ptr<Lists> lists_;
  };

  // Builds the next version: the latest with `added` facts added, then `removed` facts
  // removed. Facts already there, repeats, and removals of facts not there are ignored.
  // Costs the touched entities' lists, not the graph's size. The writer's; it may run on a
  // thread of its own while the caller does other work, as long as calls do not overlap.
  Prepared Prepare(absl::Span<const Triple> added, absl::Span<const Triple> removed);
  // Makes `prepared` the latest version and returns it.
  Version Commit(Prepared prepared);
  // Takes `prepared`'s lists back out: the latest version stays the latest, as if it had
  // not been prepared.
  void Abort(Prepared prepared);

  // Prepare, then Commit. `*added_count` / `*removed_count` (if not null) receive the facts
  // actually added and removed.
  Version Apply(absl::Span<const Triple> added, absl::Span<const Triple> removed,
                uint64_t* added_count, uint64_t* removed_count);

  // Bytes of replaced lists kept because a held version before their replacement still
  // reads them (MemoryUsage::retained), without walking the slots: cheap enough to scrape.
  uint64_t RetainedBytes() const;

  // Walks every slot: O(entities). For benchmarks and occasional reporting.
  MemoryUsage ApproximateMemoryUsage() const;

 private:
  std::shared_ptr<State> state_;
  Version latest_;
};

}  // namespace grail

#endif  // GRAIL_STORE_ADJACENCY_INDEX_H_
