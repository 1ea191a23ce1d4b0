// Late fusion's classifier (GraIL paper, Section 5.2): a linear model over the scores that
// several methods give one fact, trained on validation facts against negatives to tell the
// true ones apart. Logistic regression: P(true | x) = sigmoid(w . x + b). No LibTorch.
#ifndef GRAIL_MODEL_FUSION_LINEAR_FUSION_H_
#define GRAIL_MODEL_FUSION_LINEAR_FUSION_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace grail {

struct LinearFusion {
  std::vector<double> weights;
  double bias = 0;

  // w . x + b, the log-odds that the fact is true. Requires x.size() == weights.size().
  double Logit(absl::Span<const double> x) const;
};

// Solves a x = b (a is n x n, small) by Gaussian elimination with partial pivoting, the
// solution replacing b. Returns false for a singular system.
bool SolveLinear(std::vector<std::vector<double>> a, std::vector<double>& b);

// Fits the classifier to rows `x` (one per fact, one column per method) with labels
// `is_true`, by Newton's method on the mean log-loss plus `l2` times the squared weights.
// Columns are standardised while fitting (so l2 treats them alike, whatever their scales)
// and the result is in the original units. Errors: INVALID_ARGUMENT for no rows, rows of
// different widths, labels of one class only, or sizes that differ.
absl::StatusOr<LinearFusion> FitLogistic(const std::vector<std::vector<double>>& x,
                                         absl::Span<const uint8_t> is_true, double l2 = 1e-4);

}  // namespace grail

#endif  // GRAIL_MODEL_FUSION_LINEAR_FUSION_H_
