#include "server/scoring/path_work.h"

#include <chrono>
#include <utility>
#include <vector>

namespace grail {
namespace {

struct PathItem final : WorkItem {
  PathBatch neighbourhood;  // one query's

  int64_t nodes() const override { return neighbourhood.num_nodes(); }
  int64_t edges() const override { return neighbourhood.num_edges(); }
  int64_t bytes() const override {
    return static_cast<int64_t>(sizeof(PathItem) + neighbourhood.MemoryBytes());
  }
};

}  // namespace

const WorkNames& PathRunner::names() const {
  static const WorkNames* const kNames =
      new WorkNames{"query", "the query's neighbourhood", "raise the limits"};
  return *kNames;
}

bool PathRunner::Compatible(const WorkItem& first, const WorkItem& next) const {
  const PathBatch& a = static_cast<const PathItem&>(first).neighbourhood;
  const PathBatch& b = static_cast<const PathItem&>(next).neighbourhood;
  return a.side_pairs == b.side_pairs && a.graph_relations == b.graph_relations;
}

BatchOutcome PathRunner::Run(absl::Span<const BatchEntry> batch, ThreadScratch& scratch) const {
  PathBatch* arrays = scratch.Find<PathBatch>();
  if (arrays == nullptr) arrays = &scratch.Emplace<PathBatch>();
  arrays->Clear();
  std::vector<int64_t> query_of;
  query_of.reserve(batch.size());
  for (const BatchEntry& entry : batch) {
    query_of.push_back(
        arrays->AppendOrShare(static_cast<const PathItem&>(*entry.item).neighbourhood));
  }
  BatchOutcome outcome;
  outcome.nodes = arrays->num_nodes();  // what the forward runs: shared queries once
  outcome.edges = arrays->num_edges();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<PathScores> scores = model_.Score(*arrays);
  outcome.forward_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  outcome.status = scores.status();
  if (!scores.ok()) return outcome;
  for (size_t b = 0; b < batch.size(); ++b) {
    static_cast<PathJob&>(*batch[b].job).AcceptQuery(batch[b].index, *arrays, query_of[b], *scores);
  }
  return outcome;
}

absl::StatusOr<std::unique_ptr<WorkItem>> PathJob::Extract(size_t i, ThreadScratch& scratch,
                                                           int64_t max_nodes) {
  PathBatchBuilder* builder = scratch.Find<PathBatchBuilder>();
  if (builder == nullptr) builder = &scratch.Emplace<PathBatchBuilder>();
  auto item = std::make_unique<PathItem>();
  absl::Status built = ExtractQuery(i, *builder, max_nodes, &item->neighbourhood);
  if (!built.ok()) return built;
  return item;
}

}  // namespace grail
