// Read access to a knowledge graph's adjacency, independent of how the graph is held.
//
// Subgraph extraction, negative sampling and evaluation read graphs only through this
// interface, so they run unchanged on an immutable graph loaded from a file (StaticGraph)
// and on a snapshot of the live, RocksDB-backed store.
#ifndef GRAIL_GRAPH_GRAPH_VIEW_H_
#define GRAIL_GRAPH_GRAPH_VIEW_H_

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/types/span.h"
#include "graph/ids.h"

namespace grail {

// The other end of an edge, seen from one entity.
struct Neighbor {
  EntityId entity = 0;
  RelationId relation = 0;

  friend bool operator==(const Neighbor& a, const Neighbor& b) {
    return a.entity == b.entity && a.relation == b.relation;
  }
  friend bool operator<(const Neighbor& a, const Neighbor& b) {
    return a.entity != b.entity ? a.entity < b.entity : a.relation < b.relation;
  }
};

// The pairs of relation sides that meet at some entity (graph/relation_sides.h).
using RelationSidePairs = std::vector<std::pair<uint32_t, uint32_t>>;

// Implementations are immutable for as long as a caller holds them (a snapshot), so all
// methods are safe to call from many threads at once, and returned spans stay valid for
// the lifetime of the view.
class GraphView {
 public:
  virtual ~GraphView() = default;

  // Entities have ids 0 .. num_entities() - 1.
  virtual uint32_t num_entities() const = 0;
  // Relation ids that occur are < num_relations().
  virtual uint32_t num_relations() const = 0;
  // Number of distinct facts.
  virtual uint64_t num_facts() const = 0;

  // Facts `e --relation--> entity`, sorted by (entity, relation), without duplicates.
  // Requires e < num_entities().
  virtual absl::Span<const Neighbor> OutEdges(EntityId e) const = 0;
  // Facts `entity --relation--> e`, sorted by (entity, relation), without duplicates.
  virtual absl::Span<const Neighbor> InEdges(EntityId e) const = 0;
  // The entities with at least one fact `e --relation--> e`, in id order, each once.
  // Rare in knowledge graphs, and the only facts an entity can have that make its enclosing
  // subgraph with a distant entity differ from another's, so rankings need them listed.
  virtual absl::Span<const EntityId> SelfLoopEntities() const = 0;
  // Which relations meet at an entity, and on which side (graph/relation_sides.h): what a
  // graph of relations is built from. Never null.
  virtual std::shared_ptr<const RelationSidePairs> SidePairs() const = 0;

  // Whether `head --relation--> tail` is a fact. Ids beyond the graph are simply absent.
  bool HasFact(EntityId head, RelationId relation, EntityId tail) const;
  // Number of distinct facts touching e in either direction (a self-loop counts twice).
  uint32_t Degree(EntityId e) const {
    return static_cast<uint32_t>(OutEdges(e).size() + InEdges(e).size());
  }
};

}  // namespace grail

#endif  // GRAIL_GRAPH_GRAPH_VIEW_H_
