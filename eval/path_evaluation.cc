#include "eval/path_evaluation.h"

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace grail {
namespace {

// One query's scores in a path batch: its neighbourhood's nodes have their own, every other
// entity the far score.
class PathQueryScores : public QueryScores {
 public:
  PathQueryScores(const PathBatch& batch, int64_t q, const PathScores& scores)
      : batch_(batch), q_(q), scores_(scores) {}
  float Of(EntityId entity) const override { return scores_.Of(batch_, q_, entity); }
  bool HasOwn(EntityId entity) const override { return batch_.NodeOf(q_, entity) >= 0; }
  void ForEachOwn(absl::FunctionRef<void(EntityId, float)> fn) const override {
    for (int64_t node = batch_.node_begin[q_]; node < batch_.node_begin[q_ + 1]; ++node) {
      fn(static_cast<EntityId>(batch_.node_entity[node]), scores_.node[node]);
    }
  }
  int64_t NumOwn() const override { return batch_.node_begin[q_ + 1] - batch_.node_begin[q_]; }
  float Rest() const override { return scores_.far[q_]; }

 private:
  const PathBatch& batch_;
  const int64_t q_;
  const PathScores& scores_;
};

}  // namespace

absl::Status RunPathQueries(
    const PathModel& model, const GraphView& graph, const RelationMap& relations,
    absl::Span<const PathQuery> queries, const PathScoringOptions& options,
    const std::function<void(size_t, const PathBatch&, int64_t, const PathScores&)>& read) {
  const int64_t n = static_cast<int64_t>(queries.size());
  const int64_t batch_size = std::max(1, options.batch_queries);
  const int64_t num_batches = (n + batch_size - 1) / batch_size;
  std::atomic<int64_t> next_batch{0};
  absl::Mutex mu;
  absl::Status error;
  auto worker = [&] {
    PathNeighbourhoodSpec spec = model.Neighbourhood(&graph, &relations, 0);
    spec.prune = options.prune;
    PathBatchBuilder builder;
    PathBatch batch;
    for (int64_t b = next_batch++; b < num_batches; b = next_batch++) {
      {
        absl::MutexLock lock(&mu);
        if (!error.ok()) return;
      }
      const int64_t begin = b * batch_size;
      const int64_t end = std::min(n, begin + batch_size);
      const absl::Status status = builder.Build(spec, queries.subspan(begin, end - begin), &batch);
      absl::StatusOr<PathScores> scores =
          status.ok() ? model.Score(batch) : absl::StatusOr<PathScores>(status);
      if (!scores.ok()) {
        absl::MutexLock lock(&mu);
        if (error.ok()) error = scores.status();
        return;
      }
      for (int64_t i = begin; i < end; ++i) read(static_cast<size_t>(i), batch, i - begin, *scores);
    }
  };
  const int threads =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(options.threads, num_batches)));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  return error;
}

absl::StatusOr<std::vector<float>> ScorePathFacts(const PathModel& model, const GraphView& graph,
                                                  const RelationMap& relations,
                                                  absl::Span<const Triple> facts,
                                                  const PathScoringOptions& options) {
  std::vector<PathQuery> queries;
  queries.reserve(facts.size());
  for (size_t i = 0; i < facts.size(); ++i) {
    const Triple& f = facts[i];
    const int32_t r = relations(f.relation);
    if (r < 0 || r >= model.NumRelations(graph)) {
      return absl::InvalidArgumentError(
          absl::StrCat("fact ", i, ": relation id ", f.relation, " is unknown to the model"));
    }
    queries.emplace_back(f.head, r, std::vector<EntityId>{}, std::nullopt,
                         std::vector<EntityId>{f.tail});
  }
  std::vector<float> scores(facts.size());
  absl::Status status =
      RunPathQueries(model, graph, relations, queries, options,
                     [&](size_t i, const PathBatch& batch, int64_t q, const PathScores& s) {
                       scores[i] = s.Of(batch, q, facts[i].tail);
                     });
  if (!status.ok()) return status;
  return scores;
}

absl::StatusOr<EvaluationResult> EvaluatePath(const PathModel& model, const GraphView& graph,
                                              const RelationMap& relations,
                                              absl::Span<const Triple> test,
                                              const PathEvaluationOptions& options) {
  return EvaluateRankingQueries(
      graph, relations, model.NumRelations(graph), test, options,
      [&](absl::Span<const RankingQuery> queries,
          const std::function<void(size_t, const QueryScores&)>& read) {
        std::vector<PathQuery> path_queries;
        path_queries.reserve(queries.size());
        for (const RankingQuery& q : queries) path_queries.emplace_back(q.source, q.relation);
        return RunPathQueries(
            model, graph, relations, path_queries, options.scoring,
            [&](size_t i, const PathBatch& batch, int64_t q, const PathScores& scores) {
              read(i, PathQueryScores(batch, q, scores));
            });
      });
}

}  // namespace grail
