// The live graph's in-memory index, and the immutable snapshots that readers score against.
//
// LiveGraph mirrors the TripleStore in memory (adjacency both ways plus the entity and
// relation dictionaries), so that reads never touch disk. Each committed chunk makes a new
// version; a GraphSnapshot is a handle on one version:
//   * it sees all of a chunk or none of it, and every chunk applied before it was taken;
//   * it never changes while held, and the spans and names it hands out stay valid until
//     the last handle on it is dropped, however many chunks are applied meanwhile;
//   * taking one costs a pointer copy under a mutex that the writer holds only to swap
//     that pointer, so readers never wait for a chunk to be written or indexed.
// Versions share structure (AdjacencyIndex keeps every held version's lists at once, the
// NameTable is append-only), so applying a chunk costs time and memory proportional to what
// the chunk touches, not to the size of the graph.
#ifndef GRAIL_STORE_LIVE_GRAPH_H_
#define GRAIL_STORE_LIVE_GRAPH_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/graph_view.h"
#include "graph/ids.h"
#include "graph/relation_sides.h"
#include "graph/vocabulary.h"
#include "store/adjacency_index.h"
#include "store/name_table.h"

namespace grail {

// One immutable version of the live graph. Implements GraphView, so subgraph extraction
// runs on it unchanged. Thread safety: immutable; every method may be called from any
// number of threads at once. A snapshot stays valid after the LiveGraph (or TripleStore)
// that made it is destroyed.
class GraphSnapshot final : public GraphView {
 public:
  uint32_t num_entities() const override { return num_entities_; }
  uint32_t num_relations() const override { return relations_->size(); }
  uint64_t num_facts() const override { return num_facts_; }
  // Requires e < num_entities().
  absl::Span<const Neighbor> OutEdges(EntityId e) const override { return adjacency_.OutEdges(e); }
  // Requires e < num_entities().
  absl::Span<const Neighbor> InEdges(EntityId e) const override { return adjacency_.InEdges(e); }
  absl::Span<const EntityId> SelfLoopEntities() const override { return *self_loops_; }
  std::shared_ptr<const RelationSidePairs> SidePairs() const override { return side_pairs_; }

  // The number of chunks this version contains (the store's sequence number).
  uint64_t sequence() const { return sequence_; }

  // Entities removed explicitly (RemoveTriples' `entities`): their ids stay taken, they have
  // no facts, FindEntity does not find them and rankings skip them. Sorted.
  absl::Span<const EntityId> RemovedEntities() const { return *removed_; }
  bool IsRemoved(EntityId e) const {
    return std::binary_search(removed_->begin(), removed_->end(), e);
  }
  // Entities that exist in this version: num_entities() minus the removed ones.
  uint32_t num_live_entities() const {
    return num_entities_ - static_cast<uint32_t>(removed_->size());
  }

  // The id of the entity called `name`, or nullopt if this version has no such entity
  // (including entities created after this snapshot was taken, and removed ones).
  std::optional<EntityId> FindEntity(absl::string_view name) const;
  // The same, removed entities included (the store revives them when a fact names them).
  std::optional<EntityId> FindEntityIncludingRemoved(absl::string_view name) const;
  // The name of entity `e`. Requires e < num_entities(). Valid while the snapshot is held.
  const std::string& EntityName(EntityId e) const { return entity_names_->Name(e); }

  // The id of the relation called `name`, or nullopt.
  std::optional<RelationId> FindRelation(absl::string_view name) const {
    return relations_->Find(name);
  }
  // Requires r < num_relations(). Valid while the snapshot is held.
  const std::string& RelationName(RelationId r) const { return relations_->Name(r); }
  // Relation names in id order; size() == num_relations(). Relations keep their ids when
  // their last fact goes.
  const std::vector<std::string>& relation_names() const { return relations_->names(); }
  // How many facts relation `r` has in this version. Requires r < num_relations().
  uint64_t RelationFacts(RelationId r) const { return (*relation_facts_)[r]; }
  // The relations that have facts in this version: what the graph uses. A relation whose
  // every fact was removed no longer counts (GetStats, a reloaded model's vocabulary check).
  uint32_t num_live_relations() const;
  std::vector<std::string> LiveRelationNames() const;

 private:
  friend class LiveGraph;
  GraphSnapshot() = default;

  uint32_t num_entities_ = 0;
  uint64_t num_facts_ = 0;
  uint64_t sequence_ = 0;
  AdjacencyIndex::Version adjacency_;
  // Shared by all versions; ids >= num_entities_ belong to later versions.
  std::shared_ptr<const NameTable> entity_names_;
  // Private to the versions between two relation additions (relations are few).
  std::shared_ptr<const Vocabulary> relations_;
  // Facts per relation id (size num_relations()); copied by every chunk that changes
  // them (relations are few).
  std::shared_ptr<const std::vector<uint64_t>> relation_facts_;
  // Shared by the versions between two chunks that give a new entity a self-loop (copied
  // then: self-loops are rare, and the list holds one id per entity that has any).
  std::shared_ptr<const std::vector<EntityId>> self_loops_;
  // Likewise for the removed entities (copied by a chunk that removes or revives one).
  std::shared_ptr<const std::vector<EntityId>> removed_;
  // Shared by the versions between two chunks that make a pair of relation sides meet or
  // part (rare once a graph's relations have met).
  std::shared_ptr<const RelationSidePairs> side_pairs_;
};

// What one chunk changes in the graph, with ids already assigned by the store.
struct GraphDelta {
  // Names of the entities the chunk creates; they get ids num_entities(), +1, ... in order.
  std::vector<std::string> new_entities;
  // Likewise for relations.
  std::vector<std::string> new_relations;
  // The chunk's facts: facts not in the graph, each once (the store passes only those; the
  // per-relation fact counts rely on it).
  std::vector<Triple> facts;
  // Facts the chunk removes, applied after `facts`: facts in the graph, each once. Entities
  // and relations keep their names and ids when their last fact goes.
  std::vector<Triple> removed_facts;
  // Entities the chunk removes (their facts must be in removed_facts) and removed entities
  // it brings back (a fact names them again). Distinct ids.
  std::vector<EntityId> removed_entities;
  std::vector<EntityId> revived_entities;
  // The sequence number of the version this delta produces.
  uint64_t sequence = 0;
};

// The mutable index: applies deltas, hands out snapshots.
//
// Thread safety: Snapshot() may be called from any thread, concurrently with Apply().
// Apply() calls must not overlap (the TripleStore serialises its writers).
class LiveGraph {
 public:
  // Sizes of the latest version's structures, in bytes, from the structures' sizes
  // (allocator overhead not included).
  struct MemoryUsage {
    uint64_t adjacency_bytes = 0;
    uint64_t entity_name_bytes = 0;
    uint64_t relation_name_bytes = 0;
    uint64_t total() const { return adjacency_bytes + entity_name_bytes + relation_name_bytes; }
  };

  // An empty graph at sequence 0. `relation_sides` false: snapshots list no relation side
  // pairs (SidePairs() empty whatever the facts) until TrackRelationSides(true).
  explicit LiveGraph(bool relation_sides = true);
  LiveGraph(const LiveGraph&) = delete;
  LiveGraph& operator=(const LiveGraph&) = delete;

  // The latest version. O(1); never waits for an Apply() in progress beyond its final
  // pointer swap.
  std::shared_ptr<const GraphSnapshot> Snapshot() const;

  // Publishes a new version with `delta` applied and returns the number of facts it
  // added (removals are not counted). Requires: every id in delta.facts is below the entity /
  // relation counts after the delta's new names; the new names are not already in the graph.
  // Snapshots taken before the call are unaffected.
  uint64_t Apply(const GraphDelta& delta);

  // Apply(), with `alongside` (the chunk's durable write) run on the calling thread while the
  // chunk's adjacency lists are built on another, for chunks of kConcurrentFacts facts or
  // more (smaller ones run one after the other). The version is published only once
  // `alongside` succeeded; if it fails, the lists are taken back out, nothing is published,
  // and its error is returned.
  absl::StatusOr<uint64_t> ApplyAlongside(const GraphDelta& delta,
                                          absl::FunctionRef<absl::Status()> alongside);
  static constexpr size_t kConcurrentFacts = 1000;

  // Starts or stops following which relation sides meet: on, the pairs are counted off the
  // latest version's lists once (O(facts); the writer's, like Apply()) and every later Apply
  // keeps them; off, snapshots list none and chunks skip the work (a third of a chunk's cost
  // on a power-law graph of 10^6 entities). Publishes a version of the same graph and
  // sequence with the pairs (or none). Only a model of any relation (ULTRA) reads them.
  void TrackRelationSides(bool on);
  bool tracks_relation_sides() const { return relation_sides_; }

  // Adding `facts` (ids valid after their chunk's new names; facts the latest version lacks)
  // in order: the position of the first after which more than `limit` pairs of relation
  // sides would meet (graph/relation_sides.h), or nullopt. The writer's, like Apply(); nullopt
  // when the graph keeps no relation sides.
  std::optional<size_t> FirstFactPastRelationPairLimit(absl::Span<const Triple> facts,
                                                       uint64_t limit) const;
  // The pairs of relation sides that meet in the latest version.
  uint64_t num_relation_side_pairs() const { return Snapshot()->SidePairs()->size(); }

  // Bytes of adjacency lists that later chunks replaced, kept while an older snapshot that
  // reads them is held (AdjacencyIndex::RetainedBytes). O(1); any thread.
  uint64_t retained_adjacency_bytes() const { return adjacency_.RetainedBytes(); }

  // The latest version's names, counts and sequence without its adjacency (every list
  // empty): for holders that only name ids, such as an export, so that holding it for
  // minutes keeps none of the lists later chunks replace.
  std::shared_ptr<const GraphSnapshot> NamesSnapshot() const;

  // Walks the latest version; O(entities). For benchmarks and occasional reporting.
  MemoryUsage ApproximateMemoryUsage() const;

 private:
  // Publishes the version of `delta` whose adjacency is `prepared` (built from the latest).
  uint64_t Publish(const GraphDelta& delta, AdjacencyIndex::Prepared prepared);

  // Written only by Apply() (one at a time); Apply() reads it without the lock.
  std::shared_ptr<NameTable> entity_names_;
  // Every version's adjacency; written only by Apply().
  AdjacencyIndex adjacency_;
  // Which relation sides meet, kept chunk by chunk; written only by Apply().
  RelationSideTracker side_tracker_;
  bool relation_sides_;  // written only by the writer (Apply, TrackRelationSides)
  mutable std::mutex mu_;
  // Guarded by mu_ for readers; the writer swaps it under mu_.
  std::shared_ptr<const GraphSnapshot> current_;
};

}  // namespace grail

#endif  // GRAIL_STORE_LIVE_GRAPH_H_
