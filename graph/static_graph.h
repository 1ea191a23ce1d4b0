// An immutable graph in compressed sparse row form: one array of out-neighbours and one of
// in-neighbours, each sliced per entity by an offsets array. Built once from a list of
// facts (e.g. a triple file); the live store keeps its own structure behind GraphView.
#ifndef GRAIL_GRAPH_STATIC_GRAPH_H_
#define GRAIL_GRAPH_STATIC_GRAPH_H_

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/types/span.h"
#include "graph/graph_view.h"
#include "graph/ids.h"

namespace grail {

class StaticGraph final : public GraphView {
 public:
  StaticGraph() = default;

  // Builds the graph over entities 0 .. num_entities - 1 from `facts`; repeated facts
  // collapse into one. Requires every id in `facts` to be < num_entities.
  StaticGraph(uint32_t num_entities, absl::Span<const Triple> facts);

  uint32_t num_entities() const override { return num_entities_; }
  uint32_t num_relations() const override { return num_relations_; }
  uint64_t num_facts() const override { return out_.size(); }
  absl::Span<const Neighbor> OutEdges(EntityId e) const override {
    return {out_.data() + out_offsets_[e], out_offsets_[e + 1] - out_offsets_[e]};
  }
  absl::Span<const Neighbor> InEdges(EntityId e) const override {
    return {in_.data() + in_offsets_[e], in_offsets_[e + 1] - in_offsets_[e]};
  }
  absl::Span<const EntityId> SelfLoopEntities() const override { return self_loops_; }
  // Computed on the first call (only ULTRA's models ask), then kept; thread-safe.
  std::shared_ptr<const RelationSidePairs> SidePairs() const override;

  // Every fact, sorted by (head, relation, tail).
  std::vector<Triple> Facts() const;

 private:
  uint32_t num_entities_ = 0;
  uint32_t num_relations_ = 0;
  std::vector<uint64_t> out_offsets_{0};
  std::vector<uint64_t> in_offsets_{0};
  std::vector<Neighbor> out_;
  std::vector<Neighbor> in_;
  std::vector<EntityId> self_loops_;
  // Shared by copies, which hold the same facts.
  struct SidePairsOnce {
    std::once_flag once;
    std::shared_ptr<const RelationSidePairs> pairs;
  };
  std::shared_ptr<SidePairsOnce> side_pairs_ = std::make_shared<SidePairsOnce>();
};

}  // namespace grail

#endif  // GRAIL_GRAPH_STATIC_GRAPH_H_
