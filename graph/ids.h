// Dense identifiers shared by every component.
//
// Entities and relations are named by opaque strings at the edges of the system (files,
// RPCs) and by dense 32-bit ids everywhere inside. Ids are assigned in order of first
// appearance and never reused, so an id is an index into per-entity arrays.
#ifndef GRAIL_GRAPH_IDS_H_
#define GRAIL_GRAPH_IDS_H_

#include <cstdint>
#include <tuple>

namespace grail {

using EntityId = uint32_t;
using RelationId = uint32_t;

// One fact: `head --relation--> tail`.
struct Triple {
  EntityId head = 0;
  RelationId relation = 0;
  EntityId tail = 0;

  friend bool operator==(const Triple& a, const Triple& b) {
    return a.head == b.head && a.relation == b.relation && a.tail == b.tail;
  }
  friend bool operator!=(const Triple& a, const Triple& b) { return !(a == b); }
  friend bool operator<(const Triple& a, const Triple& b) {
    return std::tie(a.head, a.relation, a.tail) < std::tie(b.head, b.relation, b.tail);
  }
  template <typename H>
  friend H AbslHashValue(H h, const Triple& t) {
    return H::combine(std::move(h), t.head, t.relation, t.tail);
  }
};

}  // namespace grail

#endif  // GRAIL_GRAPH_IDS_H_
