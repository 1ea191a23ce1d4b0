// The paper's evaluation protocol (Section 4.1), exactly:
//   AUC-PR: every test fact and one negative (head or tail replaced uniformly);
//   ranking: every test fact against `negatives` tail-replaced negatives and, separately,
//   `negatives` head-replaced ones; MRR and Hits@1/5/10 over both lists.
// Negatives are never facts of the graph, never self-loops and never the test fact itself
// (negative_sampling.h); ties rank by the mean of optimistic and pessimistic rank
// (ranking_metrics.h). Everything is drawn from one seeded generator, so a seed fixes the
// negatives whatever the model.
#ifndef GRAIL_MODEL_EVALUATION_H_
#define GRAIL_MODEL_EVALUATION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/fact_scoring.h"
#include "model/grail_model.h"
#include "storage/graph_view.h"

namespace grail {

struct EvaluationOptions {
  uint64_t seed = 0;
  int negatives = 49;  // per side for ranking
  ScoringOptions scoring;
};

struct EvaluationResult {
  double auc_pr = 0;
  double mrr = 0;
  double hits_at_1 = 0;
  double hits_at_5 = 0;
  double hits_at_10 = 0;
  int64_t n = 0;  // test facts evaluated (each gives one head and one tail ranking list)
  // Cost, not quality (left out of ToJson): subgraphs scored, and the seconds spent
  // extracting and scoring them, for throughput figures.
  int64_t subgraphs_scored = 0;
  double scoring_seconds = 0;

  // One JSON object with the fields above (fractions in 0..1).
  std::string ToJson() const;
};

// Evaluates `model` on `test` (ids of `graph`, relations mapped by `relations`, empty for
// identity). Test facts must not be in the graph. Errors: INVALID_ARGUMENT if a test fact
// cannot be scored (unknown relation, head == tail).
absl::StatusOr<EvaluationResult> Evaluate(const GrailModel& model, const GraphView& graph,
                                          const RelationMap& relations,
                                          absl::Span<const Triple> test,
                                          const EvaluationOptions& options);

// AUC-PR alone (one negative per fact), as the trainer's validation uses it.
absl::StatusOr<double> EvaluateAucPr(const GrailModel& model, const GraphView& graph,
                                     const RelationMap& relations, absl::Span<const Triple> facts,
                                     uint64_t seed, const ScoringOptions& scoring);

}  // namespace grail

#endif  // GRAIL_MODEL_EVALUATION_H_
