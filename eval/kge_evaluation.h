// Evaluating a KGE model (model/kge/kge_model.h) on the same protocol and negatives as GraIL,
// plus ranking against every entity (eval/query_evaluation.h). One ranking query scores
// every entity of the graph from its embeddings.
#ifndef GRAIL_EVAL_KGE_EVALUATION_H_
#define GRAIL_EVAL_KGE_EVALUATION_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "eval/evaluation.h"
#include "eval/query_evaluation.h"
#include "graph/graph_view.h"
#include "model/kge/kge_model.h"

namespace grail {

struct KgeEvaluationOptions : RankingEvaluationOptions {
  int queries_per_pass = 64;
};

// The graph's entity ids must be the model's: every entity of `graph` is in the model's
// vocabulary at the same id (the model may know more). `relations` maps the graph's relation
// ids to the model's, empty for identity. Errors: INVALID_ARGUMENT for a graph with entities
// the model does not know, or a test fact that cannot be scored.
absl::StatusOr<EvaluationResult> EvaluateKge(const KgeModel& model, const GraphView& graph,
                                             const RelationMap& relations,
                                             absl::Span<const Triple> test,
                                             const KgeEvaluationOptions& options);

}  // namespace grail

#endif  // GRAIL_EVAL_KGE_EVALUATION_H_
