// Evaluating the path-based scorer (model/path_model.h) on the same protocol and negatives
// as GraIL (model/evaluation.h), plus ranking against every entity.
//
// A fact (h, r, t) is scored as the tail query (h, r, ?) scores t: that is its score for
// AUC-PR and in the tail ranking list. The head ranking list is the inverse query
// (t, r^-1, ?), one pass that scores the true head and every head negative. Negatives are
// drawn exactly as Evaluate() draws them for the same seed, so the families compare on the
// same facts.
//
// Full ranking (filtered): the true tail among every entity but h, and the true head among
// every entity but t, leaving out the other known answers of the query (facts of the graph
// and of `test`); ties count as the mean of the optimistic and pessimistic rank.
#ifndef GRAIL_MODEL_PATH_EVALUATION_H_
#define GRAIL_MODEL_PATH_EVALUATION_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/evaluation.h"
#include "model/path_batch.h"
#include "model/path_model.h"
#include "storage/graph_view.h"

namespace grail {

struct PathScoringOptions {
  int batch_queries = 16;  // queries per forward
  int threads = 1;         // workers, each building batches and running forwards
};

// Runs every query (in batches, on `options.threads` workers) and calls `read(i, batch, q,
// scores)` once per query i, with q its index in `batch`. `read` may run on several threads
// at once, for distinct i. Errors: the first failing batch's.
absl::Status RunPathQueries(
    const PathModel& model, const GraphView& graph, const RelationMap& relations,
    absl::Span<const PathQuery> queries, const PathScoringOptions& options,
    const std::function<void(size_t, const PathBatch&, int64_t, const PathScores&)>& read);

struct PathEvaluationOptions {
  uint64_t seed = 0;
  int negatives = 49;        // per side, for the 50-candidate ranking
  bool sampled = true;       // AUC-PR and the ranking against sampled negatives
  bool full_ranking = true;  // filtered ranking against every entity
  PathScoringOptions scoring;
};

// Errors: INVALID_ARGUMENT if a test fact cannot be scored (relation unknown to the model,
// head == tail).
absl::StatusOr<EvaluationResult> EvaluatePath(const PathModel& model, const GraphView& graph,
                                              const RelationMap& relations,
                                              absl::Span<const Triple> test,
                                              const PathEvaluationOptions& options);

}  // namespace grail

#endif  // GRAIL_MODEL_PATH_EVALUATION_H_
