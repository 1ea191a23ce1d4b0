// Fitting an ensemble's rule (ensemble_model.h) on validation queries. No LibTorch.
//
// The weights maximise the likelihood of each validation query's answer under a softmax over
// its candidates (listwise: what a ranking is judged on), a convex problem in the weights,
// solved by Newton's method. The weights are then scaled, and the bias set, by a logistic fit
// of the combined score of each answer against a candidate drawn from its query, so the score
// reads as the log-odds that a fact is true, as every family's does.
#ifndef GRAIL_MODEL_ENSEMBLE_ENSEMBLE_FIT_H_
#define GRAIL_MODEL_ENSEMBLE_ENSEMBLE_FIT_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/fusion/linear_fusion.h"

namespace grail {

// One validation query's candidates: each row the members' scores of one candidate (or of a
// group of candidates that share them, `count` of them: the entities beyond every member's
// neighbourhood), the answer's row first, counted once.
struct QueryCandidates {
  std::vector<float> scores;  // [row][member], row-major
  std::vector<double> count;  // per row
  size_t rows() const { return count.size(); }
};

struct EnsembleFitOptions {
  double l2 = 1e-3;   // times the squared weights, added to the mean loss
  uint64_t seed = 0;  // of the candidate each answer is calibrated against
  // false: every member weighs the same, and only the calibration's common scale and bias are
  // fitted (the ablation of the listwise fit).
  bool fit_weights = true;
  // The last `offsets` columns are indicators, not scores (EnsembleModel::fit_columns: a KGE
  // member's unknown candidates): their weights start at 0, and stay 0 without fit_weights.
  size_t offsets = 0;
};

// What the fit found: the rule and the mean loss before (every weight 1) and after.
struct EnsembleFit {
  LinearFusion rule;
  double loss_equal_weights = 0;
  double loss = 0;
};

// `members`: the rows' width (the fit's columns). Errors: INVALID_ARGUMENT for no queries,
// rows of another width than `members`, more offsets than columns, a query without a
// candidate besides its answer, or scores the fit cannot separate.
absl::StatusOr<EnsembleFit> FitEnsembleRule(absl::Span<const QueryCandidates> queries,
                                            size_t members, const EnsembleFitOptions& options);

// The mean reciprocal rank of each query's answer among its candidates, scored by `weights`
// over the members' scores (ties at the mean rank): a member's own with one weight 1, the
// others 0. What grail-fuse reports of the fit, on the candidates it saw.
double CandidateMrr(absl::Span<const QueryCandidates> queries, absl::Span<const double> weights);

}  // namespace grail

#endif  // GRAIL_MODEL_ENSEMBLE_ENSEMBLE_FIT_H_
