// A persistent (copy-on-write) map from entity id to that entity's out- and in-edges: the
// adjacency part of the live graph's in-memory index.
//
// A tree is an immutable value. WithFacts() and WithoutFacts() return a new tree that shares
// every node the changed facts do not touch with the old one, so
//   * copying a tree is O(1) and a copy stays unchanged however many trees are derived
//     from it later (this is what makes a GraphSnapshot cheap and isolated);
//   * adding or removing facts costs O(F log F + sum of the touched entities' degrees + touched
//     entities * kFanOut * height), independent of the size of the graph.
//
// Shape: a radix tree over entity ids with kFanOut children per node. A leaf holds, for
// each of its kFanOut entities, one immutable EdgeList (the sorted out- and in-neighbours
// in a single allocation). Adding a fact to an entity builds a new EdgeList for it, a copy
// of its leaf and copies of the inner nodes on the leaf's path; everything else is shared.
// The height grows by one level when ids outgrow it (kFanOut^height entities), which keeps
// the root small at any size: per-chunk work never includes copying a table of all
// entities.
//
// Thread safety: trees are immutable, so any number of threads may read and copy the same
// tree concurrently; WithFacts() does not modify `*this`. Reference counts are atomic, so
// dropping the last copy of an old version on any thread is safe.
#ifndef GRAIL_STORE_ADJACENCY_TREE_H_
#define GRAIL_STORE_ADJACENCY_TREE_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/types/span.h"
#include "graph/graph_view.h"
#include "graph/ids.h"

namespace grail {

class EdgeList;

class AdjacencyTree {
 public:
  static constexpr int kFanOutBits = 5;
  static constexpr uint32_t kFanOut = 1u << kFanOutBits;

  // Bytes held by one version of the tree, counted from the structures' sizes (exact
  // payload sizes; allocator overhead is not included). Nodes shared with other versions
  // are counted in full, so this is what the version would cost on its own.
  struct MemoryUsage {
    uint64_t inner_nodes = 0;
    uint64_t leaf_nodes = 0;
    uint64_t edge_lists = 0;
    uint64_t bytes = 0;
  };

  // The empty tree: every entity has no edges.
  AdjacencyTree() = default;

  // Facts `e --relation--> entity`, sorted by (entity, relation), without duplicates. Empty
  // for an entity that has no facts, including ids the tree has never seen. The span stays
  // valid for as long as this tree, or any copy of it, is alive.
  absl::Span<const Neighbor> OutEdges(EntityId e) const;
  // Facts `entity --relation--> e`, sorted by (entity, relation), without duplicates.
  absl::Span<const Neighbor> InEdges(EntityId e) const;

  // Returns this tree with `facts` added. Facts already in the tree, and repeats within
  // `facts`, are ignored; `*added` (if not null) receives the number of facts actually added.
  AdjacencyTree WithFacts(absl::Span<const Triple> facts, uint64_t* added) const;
  // Returns this tree without `facts`. Facts not in the tree, and repeats, are ignored;
  // `*removed` (if not null) receives the number of facts actually removed. Costs what
  // WithFacts does: the touched entities' lists and their paths are copied, nothing else.
  AdjacencyTree WithoutFacts(absl::Span<const Triple> facts, uint64_t* removed) const;

  // Walks the whole version: O(entities / kFanOut + entities). Meant for benchmarks and
  // occasional reporting, not for a hot path.
  MemoryUsage ApproximateMemoryUsage() const;

  // Opaque node type; defined in the .cc file.
  struct Node;

 private:
  const EdgeList* Find(EntityId e) const;
  AdjacencyTree WithChangedFacts(absl::Span<const Triple> facts, bool remove,
                                 uint64_t* changed) const;

  std::shared_ptr<const Node> root_;
  int height_ = 0;  // the root covers ids < kFanOut^height_; 0 means no root
};

}  // namespace grail

#endif  // GRAIL_STORE_ADJACENCY_TREE_H_
