// The path family's work for the engine (server/engine/inference_engine.h): an item is one
// query's neighbourhood (model/path/path_batch.h), and the runner scores a batch of queries in
// one pass, each query scoring every entity of its neighbourhood. A query costs a lookup where
// the pass cache (pass_cache.h) holds its pass: looked up before its neighbourhood is built,
// after (when the neighbourhood turned out to be the query's whole one), and again just
// before the forward (another call's forward may have made it meanwhile). Queries of several
// calls that ask the same (entity, relation) over the same neighbourhood share one query of
// the forward, and every pass a forward makes is kept.
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
#include "server/scoring/pass_cache.h"

namespace grail {

// Runs batches of one path model. Outlives every job that names it.
class PathRunner final : public BatchRunner {
 public:
  explicit PathRunner(const PathModel& model);
  const PathModel& model() const { return model_; }
  // Unique in the process: names the model in pass keys (PassKey::model).
  uint64_t instance() const { return instance_; }

  const WorkNames& names() const override;
  // ULTRA's forward runs one graph of relations: queries on another graph version (one whose
  // relation sides met otherwise) wait for a later forward.
  bool Compatible(const WorkItem& first, const WorkItem& next) const override;
  BatchOutcome Run(absl::Span<const BatchEntry> batch, ThreadScratch& scratch) const override;

 private:
  const PathModel& model_;
  const uint64_t instance_;
};

// Where a job's passes are looked up and kept: the cache (null: none), the sequence of the
// job's snapshot, and how stale a pass the job accepts.
struct PassLookup {
  PassCache* cache = nullptr;
  uint64_t sequence = 0;
  Staleness staleness;
};

// A job scored with a path model: item i is a query, answered by its pass through
// AcceptQuery(i): a cached one, or its neighbourhood built and scored in a forward.
class PathJob : public ScoringJob {
 public:
  PathJob(const PathRunner& runner, PassLookup lookup) : runner_(runner), lookup_(lookup) {}

  // Query i's key (PassKey::model and the budget set by the job, targets sorted).
  virtual PassKey KeyOf(size_t i) const = 0;
  // Builds query i's neighbourhood into `*out` (empty on entry) with `builder` (the calling
  // thread's own), stopping with RESOURCE_EXHAUSTED once it would hold more than `max_nodes`
  // entities. Thread-safe for distinct i.
  virtual absl::Status ExtractQuery(size_t i, PathBatchBuilder& builder, int64_t max_nodes,
                                    PathBatch* out) = 0;
  // Whether query i's neighbourhood, as far as its targets decide, is the query's whole one
  // (PathBatchBuilder::TargetsKeepWholeQuery; true for a query without targets).
  virtual bool TargetsKeepWholeQuery(size_t i, PathBatchBuilder& builder, int64_t max_nodes) = 0;
  // Query i's pass. Once per i, from an extraction thread or the batcher thread.
  virtual void AcceptQuery(size_t i, const QueryPass& pass) = 0;

  absl::StatusOr<std::unique_ptr<WorkItem>> Extract(size_t i, ThreadScratch& scratch,
                                                    int64_t max_nodes) final;
  const BatchRunner& runner() const final { return runner_; }
  const PathModel& model() const { return runner_.model(); }
  const PathRunner& path_runner() const { return runner_; }
  const PassLookup& lookup() const { return lookup_; }

 private:
  // The cached pass that answers `key` for this job, or null.
  std::shared_ptr<const QueryPass> Cached(const PassKey& key) const;

  const PathRunner& runner_;
  const PassLookup lookup_;
};

}  // namespace grail

#endif  // GRAIL_SERVER_SCORING_PATH_WORK_H_
