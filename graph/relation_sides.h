// Which relations meet at an entity, and on which side: the statistics a graph of relations
// is built from (ULTRA's relation graph, model/ultra/relation_graph.h).
//
// A relation side is (relation, end): side 2r is "head of r", 2r + 1 "tail of r". Two sides
// meet when at least one entity holds both: e.g. sides 2a and 2b + 1 meet when some entity is
// the head of a fact of relation a and the tail of a fact of relation b. A side meets itself
// when any entity holds it. RelationSidePairs lists the pairs that meet, each once as (x, y)
// with x <= y, sorted.
//
// StaticGraph computes them when first asked; the live graph (store/live_graph.h) keeps
// them with a RelationSideTracker, which counts entities per pair and updates the counts per
// chunk from the facts the chunk touches, so a snapshot's pairs cost nothing to take and a
// chunk costs its facts, not its entities' degrees.
#ifndef GRAIL_GRAPH_RELATION_SIDES_H_
#define GRAIL_GRAPH_RELATION_SIDES_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"
#include "graph/graph_view.h"
#include "graph/ids.h"

namespace grail {

inline uint32_t HeadSide(RelationId r) { return 2 * r; }
inline uint32_t TailSide(RelationId r) { return 2 * r + 1; }

// The distinct sides entity `e` holds, sorted, from its out-edges (heads) and in-edges
// (tails), appended to `sides` after clearing it.
void EntitySides(absl::Span<const Neighbor> out, absl::Span<const Neighbor> in,
                 std::vector<uint32_t>* sides);

// Every pair of sides that meet in `graph`. O(facts + sum over entities of sides^2).
RelationSidePairs ComputeRelationSidePairs(const GraphView& graph);

// The number of entities per pair of sides, kept up to date entity by entity. Not
// thread-safe: one writer.
class RelationSideCounts {
 public:
  // Entity e's sides were `before` and are `after` (both sorted, distinct).
  void Update(absl::Span<const uint32_t> before, absl::Span<const uint32_t> after);
  // Whether the set of meeting pairs changed since the last Pairs().
  bool changed() const { return changed_; }
  // The pairs that meet now; clears changed().
  RelationSidePairs Pairs();
  // How many pairs meet now, and whether sides x and y do.
  uint64_t num_pairs() const { return count_.size(); }
  bool Meets(uint32_t x, uint32_t y) const;

 private:
  void Add(uint32_t x, uint32_t y, int64_t delta);

  absl::flat_hash_map<uint64_t, int64_t> count_;  // (x << 32 | y), x <= y
  bool changed_ = false;
};

// The pairs of a graph that changes fact by fact. Not thread-safe: one writer (LiveGraph).
class RelationSideTracker {
 public:
  // The graph went from `before` to `after` by adding `added` and removing `removed` (facts
  // already held, absent or repeated included: presence in the two versions decides). Both
  // versions must outlive the call. Returns whether the pairs that meet changed.
  bool Apply(absl::Span<const Triple> added, absl::Span<const Triple> removed,
             const GraphView& before, const GraphView& after);
  // Forgets what it followed and follows `graph` from here: every entity's sides read off its
  // lists once, O(facts), without the change list Apply sorts (twice the facts, 20 bytes
  // each): for a whole graph at once (a store's open, tracking turned on).
  void Reset(const GraphView& graph);
  // The pairs that meet now.
  RelationSidePairs Pairs() { return counts_.Pairs(); }
  uint64_t num_pairs() const { return counts_.num_pairs(); }

  // Adding `added` (facts `before` lacks) to `before`, the graph the tracker follows, fact by
  // fact in order: the position of the first fact after which more than `limit` pairs would
  // meet, or nullopt if the whole chunk stays within. Changes nothing. Its cost is linear in
  // what it finds: for each side an entity gains, one look-up per side the entity then holds,
  // and it stops once past `limit` (so a hub gaining thousands of sides costs at most `limit`
  // look-ups, not their square).
  std::optional<size_t> FirstFactPastPairLimit(absl::Span<const Triple> added,
                                               const GraphView& before, uint64_t limit) const;

 private:
  // Facts per side of each entity with more than kTrackedDegree facts, so a chunk touching a
  // hub costs its facts there, not the hub's degree; others' sides are read off their
  // (short) lists. (side, count) sorted by side.
  static constexpr size_t kTrackedDegree = 64;
  using SideCounts = std::vector<std::pair<uint32_t, uint32_t>>;

  // (side, facts) of an entity with these lists, sorted by side.
  static SideCounts CountSides(absl::Span<const Neighbor> out, absl::Span<const Neighbor> in);

  RelationSideCounts counts_;
  absl::flat_hash_map<EntityId, SideCounts> hub_sides_;
};

}  // namespace grail

#endif  // GRAIL_GRAPH_RELATION_SIDES_H_
