#include "graph/graph_view.h"

#include <algorithm>

namespace grail {

bool GraphView::HasFact(EntityId head, RelationId relation, EntityId tail) const {
  if (head >= num_entities() || tail >= num_entities()) return false;
  absl::Span<const Neighbor> out = OutEdges(head);
  return std::binary_search(out.begin(), out.end(), Neighbor{tail, relation});
}

}  // namespace grail
