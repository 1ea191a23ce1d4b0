// The path family's work for the engine (server/engine/inference_engine.h): an item is one
// query's neighbourhood (model/path/path_batch.h), and the runner scores a batch of queries in
// one pass, each query scoring every entity of its neighbourhood. Queries of several calls
// that ask the same (entity, relation) over the same neighbourhood share one query of the
// forward.
#ifndef GRAIL_SERVER_SCORING_PATH_WORK_H_
#define GRAIL_SERVER_SCORING_PATH_WORK_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/path/path_batch.h"
#include "model/path/path_model.h"
#include "server/engine/inference_engine.h"

namespace grail {

// Runs batches of one path model. Outlives every job that names it.
class PathRunner final : public BatchRunner {
 public:
  explicit PathRunner(const PathModel& model) : model_(model) {}
  const PathModel& model() const { return model_; }

  const WorkNames& names() const override;
  // ULTRA's forward runs one graph of relations: queries on another graph version (one whose
  // relation sides met otherwise) wait for a later forward.
  bool Compatible(const WorkItem& first, const WorkItem& next) const override;
  BatchOutcome Run(absl::Span<const BatchEntry> batch, ThreadScratch& scratch) const override;

 private:
  const PathModel& model_;
};

// A job scored with a path model: item i is a query, its neighbourhood built, scored in one
// pass, and handed back through AcceptQuery(i).
class PathJob : public ScoringJob {
 public:
  explicit PathJob(const PathRunner& runner) : runner_(runner) {}

  // Builds query i's neighbourhood into `*out` (empty on entry) with `builder` (the calling
  // thread's own), stopping with RESOURCE_EXHAUSTED once it would hold more than `max_nodes`
  // entities. Thread-safe for distinct i.
  virtual absl::Status ExtractQuery(size_t i, PathBatchBuilder& builder, int64_t max_nodes,
                                    PathBatch* out) = 0;
  // Query i's scores: query q of `batch`. From the batcher thread only.
  virtual void AcceptQuery(size_t i, const PathBatch& batch, int64_t q,
                           const PathScores& scores) = 0;

  absl::StatusOr<std::unique_ptr<WorkItem>> Extract(size_t i, ThreadScratch& scratch,
                                                    int64_t max_nodes) final;
  const BatchRunner& runner() const final { return runner_; }
  const PathModel& model() const { return runner_.model(); }

 private:
  const PathRunner& runner_;
};

}  // namespace grail

#endif  // GRAIL_SERVER_SCORING_PATH_WORK_H_
