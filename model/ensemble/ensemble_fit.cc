#include "model/ensemble/ensemble_fit.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"

namespace grail {
namespace {

double Dot(const std::vector<double>& w, const float* x) {
  double z = 0;
  for (size_t j = 0; j < w.size(); ++j) z += w[j] * x[j];
  return z;
}

// The mean listwise loss at `w` and, when asked, its gradient and Hessian (penalty included).
double Loss(absl::Span<const QueryCandidates> queries, const std::vector<double>& w, double l2,
            std::vector<double>* gradient, std::vector<std::vector<double>>* hessian) {
  const size_t d = w.size();
  const double n = static_cast<double>(queries.size());
  double loss = 0;
  if (gradient != nullptr) {
    gradient->assign(d, 0.0);
    hessian->assign(d, std::vector<double>(d, 0.0));
  }
  std::vector<double> z, mean(d), second(d * d);
  for (const QueryCandidates& q : queries) {
    const size_t rows = q.rows();
    z.resize(rows);
    double top = -INFINITY;
    for (size_t i = 0; i < rows; ++i) {
      z[i] = Dot(w, &q.scores[i * d]);
      top = std::max(top, z[i]);
    }
    double total = 0;
    for (size_t i = 0; i < rows; ++i) total += q.count[i] * std::exp(z[i] - top);
    loss += (top + std::log(total) - z[0]) / n;
    if (gradient == nullptr) continue;
    std::fill(mean.begin(), mean.end(), 0.0);
    std::fill(second.begin(), second.end(), 0.0);
    for (size_t i = 0; i < rows; ++i) {
      const double p = q.count[i] * std::exp(z[i] - top) / total;
      const float* x = &q.scores[i * d];
      for (size_t j = 0; j < d; ++j) {
        mean[j] += p * x[j];
        for (size_t k = 0; k < d; ++k) second[j * d + k] += p * x[j] * x[k];
      }
    }
    for (size_t j = 0; j < d; ++j) {
      (*gradient)[j] += (mean[j] - q.scores[j]) / n;
      for (size_t k = 0; k < d; ++k) {
        (*hessian)[j][k] += (second[j * d + k] - mean[j] * mean[k]) / n;
      }
    }
  }
  for (size_t j = 0; j < d; ++j) {
    loss += l2 * w[j] * w[j];
    if (gradient != nullptr) {
      (*gradient)[j] += 2 * l2 * w[j];
      (*hessian)[j][j] += 2 * l2;
    }
  }
  return loss;
}

}  // namespace

absl::StatusOr<EnsembleFit> FitEnsembleRule(absl::Span<const QueryCandidates> queries,
                                            size_t members, const EnsembleFitOptions& options) {
  if (queries.empty()) return absl::InvalidArgumentError("no validation queries to fit on");
  if (members == 0) return absl::InvalidArgumentError("an ensemble needs a member");
  if (options.offsets >= members) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.offsets, " offset columns of ", members, " leave no score"));
  }
  for (size_t i = 0; i < queries.size(); ++i) {
    const QueryCandidates& q = queries[i];
    if (q.scores.size() != q.rows() * members) {
      return absl::InvalidArgumentError(absl::StrCat("query ", i, " has ", q.scores.size(),
                                                     " scores for ", q.rows(), " rows of ", members,
                                                     " members"));
    }
    if (q.rows() < 2) {
      return absl::InvalidArgumentError(
          absl::StrCat("query ", i, " has no candidate besides its answer"));
    }
  }
  EnsembleFit fit;
  std::vector<double> w(members, 1.0);
  std::fill(w.end() - static_cast<std::ptrdiff_t>(options.offsets), w.end(), 0.0);
  double loss = Loss(queries, w, options.l2, nullptr, nullptr);
  fit.loss_equal_weights = loss;
  std::vector<double> gradient;
  std::vector<std::vector<double>> hessian;
  for (int iteration = 0; options.fit_weights && iteration < 100; ++iteration) {
    Loss(queries, w, options.l2, &gradient, &hessian);
    std::vector<double> step = gradient;
    if (!SolveLinear(hessian, step)) {
      return absl::InvalidArgumentError("the members' scores are degenerate: the fit is singular");
    }
    // Backtracking: a Newton step on a convex loss, halved until it does not go up.
    double t = 1.0, next = loss;
    std::vector<double> tried(members);
    for (int halving = 0; halving < 30; ++halving, t /= 2) {
      for (size_t j = 0; j < members; ++j) tried[j] = w[j] - t * step[j];
      next = Loss(queries, tried, options.l2, nullptr, nullptr);
      if (next <= loss) break;
    }
    if (!(next <= loss)) break;
    double moved = 0;
    for (size_t j = 0; j < members; ++j) moved = std::max(moved, std::abs(tried[j] - w[j]));
    w = tried;
    const double gained = loss - next;
    loss = next;
    if (moved < 1e-9 || gained < 1e-12) break;
  }
  fit.loss = loss;

  // Calibration: the combined score of each answer (label 1) and of one candidate drawn from
  // its query in proportion to its count (label 0).
  SeededRandom random(options.seed);
  std::vector<std::vector<double>> rows;
  std::vector<uint8_t> labels;
  for (const QueryCandidates& q : queries) {
    double total = 0;
    for (size_t i = 1; i < q.rows(); ++i) total += q.count[i];
    double pick = random.UniformDouble() * total;
    size_t drawn = q.rows() - 1;
    for (size_t i = 1; i < q.rows(); ++i) {
      pick -= q.count[i];
      if (pick < 0) {
        drawn = i;
        break;
      }
    }
    rows.push_back({Dot(w, &q.scores[0])});
    labels.push_back(1);
    rows.push_back({Dot(w, &q.scores[drawn * members])});
    labels.push_back(0);
  }
  absl::StatusOr<LinearFusion> scale = FitLogistic(rows, labels);
  if (!scale.ok()) return scale.status();
  if (!(scale->weights[0] > 0)) {
    return absl::InvalidArgumentError(
        "the combined score does not tell the answers from other candidates (its calibration's "
        "slope is not positive)");
  }
  fit.rule.bias = scale->bias;
  for (double wj : w) fit.rule.weights.push_back(scale->weights[0] * wj);
  return fit;
}

double CandidateMrr(absl::Span<const QueryCandidates> queries, absl::Span<const double> weights) {
  if (queries.empty()) return 0;
  const std::vector<double> w(weights.begin(), weights.end());
  const size_t d = w.size();
  double total = 0;
  for (const QueryCandidates& q : queries) {
    const double answer = Dot(w, &q.scores[0]);
    double above = 0, tied = 0;
    for (size_t i = 1; i < q.rows(); ++i) {
      const double z = Dot(w, &q.scores[i * d]);
      if (z > answer) above += q.count[i];
      if (z == answer) tied += q.count[i];
    }
    total += 1.0 / (1.0 + above + tied / 2);
  }
  return total / static_cast<double>(queries.size());
}

}  // namespace grail
