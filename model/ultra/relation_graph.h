// ULTRA's graph of relations (Galkin et al., "Towards Foundation Models for Knowledge Graph
// Reasoning", ICLR 2024, Section 4.1), built from which relation sides meet at an entity
// (graph/relation_sides.h). Plain arrays, no LibTorch.
//
// Its nodes are the 2R message relations of a graph of R relations: r, and its inverse r + R
// (the head of r + R is the tail of r). Four kinds of edge join two nodes a and b when one
// entity holds both ends named:
//   0 head-to-head  (an entity is the head of a and of b)    1 tail-to-tail
//   2 head-to-tail  (the head of a, the tail of b)           3 tail-to-head
// Every node meets itself (its own heads: kinds 0 and 1). Edges are given the way the
// operator (model/ops/rspmm.h) reads them, u -k-> v adding w[k] * x[u] into v: for kind k
// between a (the first end named) and b, b -k-> a. That is the direction the released ULTRA
// weights were trained with (their operator accumulates an edge's message at its first
// index); the opposite runs and scores plausibly but far lower.
#ifndef GRAIL_MODEL_ULTRA_RELATION_GRAPH_H_
#define GRAIL_MODEL_ULTRA_RELATION_GRAPH_H_

#include <cstdint>
#include <vector>

#include "graph/graph_view.h"

namespace grail {

struct RelationGraph {
  int64_t num_nodes = 0;  // 2R
  std::vector<int64_t> src, kind, dst;
};

// The relation graph of a graph with `num_relations` relations whose sides meet as `pairs`
// says. Sides of relations >= num_relations are ignored.
RelationGraph BuildRelationGraph(const RelationSidePairs& pairs, int64_t num_relations);

}  // namespace grail

#endif  // GRAIL_MODEL_ULTRA_RELATION_GRAPH_H_
