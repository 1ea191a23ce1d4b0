// Evaluating the path-based scorer (model/path/path_model.h) on the same protocol and negatives
// as GraIL, plus ranking against every entity (eval/query_evaluation.h): each ranking query
// is one pass of the path network.
#ifndef GRAIL_EVAL_PATH_EVALUATION_H_
#define GRAIL_EVAL_PATH_EVALUATION_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "eval/evaluation.h"
#include "eval/query_evaluation.h"
#include "graph/graph_view.h"
#include "model/path/path_batch.h"
#include "model/path/path_model.h"

namespace grail {

struct PathScoringOptions {
  int batch_queries = 16;  // queries per forward
  int threads = 1;         // workers, each building batches and running forwards
  // Pruned propagation (model/path/path_batch.h): a query whose neighbourhood passes it runs
  // on the part its priority picks. None by default: exact.
  PathBudget prune;
};

// Runs every query (in batches, on `options.threads` workers) and calls `read(i, batch, q,
// scores)` once per query i, with q its index in `batch`. `read` may run on several threads
// at once, for distinct i. Errors: the first failing batch's.
absl::Status RunPathQueries(
    const PathModel& model, const GraphView& graph, const RelationMap& relations,
    absl::Span<const PathQuery> queries, const PathScoringOptions& options,
    const std::function<void(size_t, const PathBatch&, int64_t, const PathScores&)>& read);

// The score of each fact (h, r, t): t's for the query (h, r, ?), on the entities its score
// depends on (a query with target t). Result i is facts[i]'s. Errors: INVALID_ARGUMENT for
// a relation unknown to the model; the batches' errors.
absl::StatusOr<std::vector<float>> ScorePathFacts(const PathModel& model, const GraphView& graph,
                                                  const RelationMap& relations,
                                                  absl::Span<const Triple> facts,
                                                  const PathScoringOptions& options);

struct PathEvaluationOptions : RankingEvaluationOptions {
  PathScoringOptions scoring;
};

// Errors: INVALID_ARGUMENT if a test fact cannot be scored (relation unknown to the model,
// head == tail).
absl::StatusOr<EvaluationResult> EvaluatePath(const PathModel& model, const GraphView& graph,
                                              const RelationMap& relations,
                                              absl::Span<const Triple> test,
                                              const PathEvaluationOptions& options);

}  // namespace grail

#endif  // GRAIL_EVAL_PATH_EVALUATION_H_
