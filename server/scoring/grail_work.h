// GraIL's work for the engine (server/engine/inference_engine.h): an item is one fact's
// enclosing subgraph, and the runner scores a batch of them as one disjoint-union forward.
//
// Scores do not depend on what else shares the batch: every subgraph is its own connected
// component, and the network only mixes nodes along edges and within a subgraph's readout.
#ifndef GRAIL_SERVER_SCORING_GRAIL_WORK_H_
#define GRAIL_SERVER_SCORING_GRAIL_WORK_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/relation_map.h"
#include "model/grail/enclosing_subgraph.h"
#include "model/grail/grail_model.h"
#include "server/engine/inference_engine.h"
#include "server/scoring/fact_score.h"

namespace grail {

// Runs batches of one GraIL model. Outlives every job that names it.
class GrailRunner final : public BatchRunner {
 public:
  explicit GrailRunner(const GrailModel& model) : model_(model) {}
  const GrailModel& model() const { return model_; }

  const WorkNames& names() const override;
  BatchOutcome Run(absl::Span<const BatchEntry> batch, ThreadScratch& scratch) const override;

 private:
  const GrailModel& model_;
};

// A job scored with a GraIL model: item i is a fact, extracted into its enclosing subgraph
// with the model's extraction config, scored, and handed back through Accept(i).
class GrailJob : public ScoringJob {
 public:
  explicit GrailJob(const GrailRunner& runner) : runner_(runner) {}

  // Extracts fact i's enclosing subgraph into `*out` with `extractor` (the calling thread's
  // own, of the model's extraction config) and returns the model's id of the relation to
  // score it with. Thread-safe for distinct i.
  virtual absl::StatusOr<int32_t> ExtractSubgraph(size_t i, SubgraphExtractor& extractor,
                                                  EnclosingSubgraph* out) = 0;
  // Fact i's score. From the batcher thread only.
  virtual void Accept(size_t i, const FactScore& score) = 0;
  // The map from the job's graph relation ids to the model's.
  virtual const RelationMap& relations() const = 0;

  absl::StatusOr<std::unique_ptr<WorkItem>> Extract(size_t i, ThreadScratch& scratch,
                                                    int64_t max_nodes) final;
  const BatchRunner& runner() const final { return runner_; }
  const GrailModel& model() const { return runner_.model(); }

 private:
  const GrailRunner& runner_;
};

}  // namespace grail

#endif  // GRAIL_SERVER_SCORING_GRAIL_WORK_H_
