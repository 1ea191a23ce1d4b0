#include "model/ultra/relation_graph.h"

namespace grail {

RelationGraph BuildRelationGraph(const RelationSidePairs& pairs, int64_t num_relations) {
  RelationGraph g;
  g.num_nodes = 2 * num_relations;
  // Side 2r (heads of r) is the head set of node r and the tail set of node r + R; side
  // 2r + 1 (tails of r) the tail set of node r and the head set of node r + R.
  auto head_node = [&](uint32_t side) -> int64_t {
    return side / 2 + (side % 2 == 0 ? 0 : num_relations);
  };
  auto tail_node = [&](uint32_t side) -> int64_t {
    return side / 2 + (side % 2 == 1 ? 0 : num_relations);
  };
  auto add = [&](int64_t from, int64_t kind, int64_t to) {
    g.src.push_back(from);
    g.kind.push_back(kind);
    g.dst.push_back(to);
  };
  // Sides x and y meet: for a = the node whose head (tail) set is x and b = the node whose
  // head (tail) set is y, the four kinds, b -k-> a; both orders of a distinct pair.
  auto edges = [&](uint32_t x, uint32_t y) {
    add(head_node(y), 0, head_node(x));
    add(tail_node(y), 1, tail_node(x));
    add(tail_node(y), 2, head_node(x));
    add(head_node(y), 3, tail_node(x));
  };
  const uint64_t sides = 2 * static_cast<uint64_t>(num_relations);
  for (const auto& [x, y] : pairs) {
    if (x >= sides || y >= sides) continue;
    edges(x, y);
    if (x != y) edges(y, x);
  }
  return g;
}

}  // namespace grail
