#include "model/fusion/linear_fusion.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace grail {

bool SolveLinear(std::vector<std::vector<double>> a, std::vector<double>& b) {
  const size_t n = b.size();
  for (size_t c = 0; c < n; ++c) {
    size_t pivot = c;
    for (size_t r = c + 1; r < n; ++r) {
      if (std::abs(a[r][c]) > std::abs(a[pivot][c])) pivot = r;
    }
    if (std::abs(a[pivot][c]) < 1e-12) return false;
    std::swap(a[c], a[pivot]);
    std::swap(b[c], b[pivot]);
    for (size_t r = c + 1; r < n; ++r) {
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  for (size_t c = n; c-- > 0;) {
    for (size_t k = c + 1; k < n; ++k) b[c] -= a[c][k] * b[k];
    b[c] /= a[c][c];
  }
  return true;
}

double LinearFusion::Logit(absl::Span<const double> x) const {
  double z = bias;
  for (size_t i = 0; i < weights.size(); ++i) z += weights[i] * x[i];
  return z;
}

absl::StatusOr<LinearFusion> FitLogistic(const std::vector<std::vector<double>>& x,
                                         absl::Span<const uint8_t> is_true, double l2) {
  if (x.empty()) return absl::InvalidArgumentError("no rows to fit");
  if (x.size() != is_true.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(x.size(), " rows but ", is_true.size(), " labels"));
  }
  const size_t d = x[0].size();
  size_t positives = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (x[i].size() != d) {
      return absl::InvalidArgumentError(
          absl::StrCat("row ", i, " has ", x[i].size(), " columns, row 0 has ", d));
    }
    positives += is_true[i] ? 1 : 0;
  }
  if (positives == 0 || positives == x.size()) {
    return absl::InvalidArgumentError("the labels must hold both true and false facts");
  }
  // Standardise each column: z = (x - mean) / scale.
  const double n = static_cast<double>(x.size());
  std::vector<double> mean(d, 0), scale(d, 0);
  for (const auto& row : x) {
    for (size_t j = 0; j < d; ++j) mean[j] += row[j] / n;
  }
  for (const auto& row : x) {
    for (size_t j = 0; j < d; ++j) scale[j] += (row[j] - mean[j]) * (row[j] - mean[j]) / n;
  }
  for (double& s : scale) s = s > 1e-24 ? std::sqrt(s) : 1.0;

  // Newton's method on theta = (w_1..w_d, b) over the standardised columns.
  std::vector<double> theta(d + 1, 0.0);
  std::vector<double> z(d + 1, 1.0);
  for (int iteration = 0; iteration < 50; ++iteration) {
    std::vector<double> gradient(d + 1, 0.0);
    std::vector<std::vector<double>> hessian(d + 1, std::vector<double>(d + 1, 0.0));
    for (size_t i = 0; i < x.size(); ++i) {
      for (size_t j = 0; j < d; ++j) z[j] = (x[i][j] - mean[j]) / scale[j];
      double logit = 0;
      for (size_t j = 0; j <= d; ++j) logit += theta[j] * z[j];
      const double p = 1.0 / (1.0 + std::exp(-logit));
      const double residual = p - (is_true[i] ? 1.0 : 0.0);
      const double curvature = std::max(p * (1.0 - p), 1e-12);
      for (size_t j = 0; j <= d; ++j) {
        gradient[j] += residual * z[j] / n;
        for (size_t k = 0; k <= d; ++k) hessian[j][k] += curvature * z[j] * z[k] / n;
      }
    }
    for (size_t j = 0; j < d; ++j) {  // the penalty leaves the bias alone
      gradient[j] += 2 * l2 * theta[j];
      hessian[j][j] += 2 * l2;
    }
    if (!SolveLinear(hessian, gradient)) {
      return absl::InvalidArgumentError("the scores are degenerate: the fit is singular");
    }
    double step = 0;
    for (size_t j = 0; j <= d; ++j) {
      theta[j] -= gradient[j];
      step = std::max(step, std::abs(gradient[j]));
    }
    if (step < 1e-10) break;
  }
  LinearFusion fusion;
  fusion.bias = theta[d];
  for (size_t j = 0; j < d; ++j) {
    fusion.weights.push_back(theta[j] / scale[j]);
    fusion.bias -= theta[j] * mean[j] / scale[j];
  }
  return fusion;
}

}  // namespace grail
