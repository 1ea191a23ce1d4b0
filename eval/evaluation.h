// The paper's evaluation protocol (Section 4.1), exactly:
//   AUC-PR: every test fact and one negative (head or tail replaced uniformly);
//   ranking: every test fact against `negatives` tail-replaced negatives and, separately,
//   `negatives` head-replaced ones; MRR and Hits@1/5/10 over both lists.
// Negatives are never facts of the graph, never self-loops and never the test fact itself
// (negative_sampling.h); ties rank by the mean of optimistic and pessimistic rank
// (ranking_metrics.h). Everything is drawn from one seeded generator, so a seed fixes the
// negatives whatever the model.
#ifndef GRAIL_EVAL_EVALUATION_H_
#define GRAIL_EVAL_EVALUATION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/graph_view.h"
#include "model/grail/fact_scoring.h"
#include "model/grail/grail_model.h"

namespace grail {

struct EvaluationOptions {
  uint64_t seed = 0;
  int negatives = 49;  // per side for ranking
  GrailScoringOptions scoring;
};

// Ranking against every entity (filtered), for models that score all entities in one pass.
struct FullRanking {
  double mrr = 0;
  double hits_at_1 = 0;
  double hits_at_3 = 0;
  double hits_at_10 = 0;
  // ExpectedHitsAmongSamples(rank, candidates, 10, 50) averaged: NBFNet's 50-sample Hits@10.
  double hits_at_10_of_50 = 0;
  // The same ranking as NBFNet's, A*Net's and ULTRA's evaluation code counts it, behind the
  // full-ranking figures they publish: a tie counts against the answer (1 + #scored at least
  // as high), and the query's source is a candidate like any other entity (unless it is a
  // known answer). The figures above rank a tie at the mean and never the source.
  double strict_mrr = 0;
  double strict_hits_at_1 = 0;
  double strict_hits_at_10 = 0;
  // Each ranking list's 1 / rank (the mean-rank one, whose mean is `mrr`), test fact by test
  // fact, its tail query then its head query: for paired comparisons of two models.
  std::vector<double> reciprocal_ranks;
};

struct EvaluationResult {
  double auc_pr = 0;
  double mrr = 0;
  double hits_at_1 = 0;
  double hits_at_5 = 0;
  double hits_at_10 = 0;
  int64_t n = 0;  // test facts evaluated (each gives one head and one tail ranking list)
  // With several runs (EvaluateGrailRuns): how many, and the standard deviation of AUC-PR across
  // them; the metrics above are then means over the runs.
  int runs = 1;
  double auc_pr_std = 0;
  // When computed (eval/path_evaluation.h): the filtered ranking against every entity.
  std::optional<FullRanking> full;
  // Cost, not quality (left out of ToJson): subgraphs scored, and the seconds spent
  // extracting and scoring them, for throughput figures.
  int64_t subgraphs_scored = 0;
  double scoring_seconds = 0;

  // One JSON object with the fields above (fractions in 0..1); `runs` and `auc_pr_std` only
  // when there was more than one run; `full_mrr`, `full_hits_at_1/3/10`, `full_hits_at_10_of_50`
  // and `full_strict_mrr`, `full_strict_hits_at_1/10` with a full ranking.
  std::string ToJson() const;
};

// Evaluates `model` on `test` (ids of `graph`, relations mapped by `relations`, empty for
// identity). Test facts must not be in the graph. Errors: INVALID_ARGUMENT if a test fact
// cannot be scored (unknown relation, head == tail).
absl::StatusOr<EvaluationResult> EvaluateGrail(const GrailModel& model, const GraphView& graph,
                                               const RelationMap& relations,
                                               absl::Span<const Triple> test,
                                               const EvaluationOptions& options);

// The scores a model gives a list of facts (ids of the evaluation's graph).
using FactScorer =
    std::function<absl::StatusOr<std::vector<float>>(absl::Span<const Triple> facts)>;

// EvaluateGrail()'s protocol for any scorer of facts (a fused model, say): the same negatives for
// the same seed. options.scoring is the scorer's business. Errors: the scorer's.
absl::StatusOr<EvaluationResult> EvaluateFacts(const GraphView& graph,
                                               absl::Span<const Triple> test,
                                               const EvaluationOptions& options,
                                               const FactScorer& score);

// EvaluateGrail() `runs` times with seeds options.seed, options.seed + 1, ...: every run draws
// all of its negatives anew (as the reference's test_auc.py --runs does), so the mean shows
// the model rather than one draw. On fb237_v1_ind (205 test facts) AUC-PR moved by up to
// 5.5 points between draws for the same model. Errors: as EvaluateGrail(); INVALID_ARGUMENT for
// runs < 1.
absl::StatusOr<EvaluationResult> EvaluateGrailRuns(const GrailModel& model, const GraphView& graph,
                                                   const RelationMap& relations,
                                                   absl::Span<const Triple> test,
                                                   const EvaluationOptions& options, int runs);

// Runs `evaluate(run)` for run = 0 .. runs - 1 and returns the means of the metrics, the run
// count and AUC-PR's sample standard deviation across runs; `full` comes from the first run
// that has one; costs are summed. Errors: the first run's error; INVALID_ARGUMENT for
// runs < 1.
absl::StatusOr<EvaluationResult> MeanOverRuns(
    int runs, const std::function<absl::StatusOr<EvaluationResult>(int run)>& evaluate);

// A validation's figures: one negative per fact (head or tail replaced), then AUC-PR and
// ROC-AUC over the facts and their negatives.
struct ClassificationMetrics {
  double auc_pr = 0;
  double auc_roc = 0;
};

// The trainer's validation: AUC-PR and ROC-AUC with one negative per fact drawn from `seed`.
absl::StatusOr<ClassificationMetrics> EvaluateClassification(
    const GrailModel& model, const GraphView& graph, const RelationMap& relations,
    absl::Span<const Triple> facts, uint64_t seed, const GrailScoringOptions& scoring);

}  // namespace grail

#endif  // GRAIL_EVAL_EVALUATION_H_
