#include "eval/ranking_metrics.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace grail {

double AveragePrecision(absl::Span<const float> scores, absl::Span<const uint8_t> is_positive) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  const double total_positives =
      static_cast<double>(std::count(is_positive.begin(), is_positive.end(), uint8_t{1}));
  if (total_positives == 0) return 0;
  double ap = 0, true_positives = 0, seen = 0, previous_recall = 0;
  for (size_t i = 0; i < order.size();) {
    // One threshold: every item tied at this score.
    size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) {
      true_positives += is_positive[order[j]] != 0 ? 1 : 0;
      ++seen;
      ++j;
    }
    const double recall = true_positives / total_positives;
    ap += (recall - previous_recall) * (true_positives / seen);
    previous_recall = recall;
    i = j;
  }
  return ap;
}

double RocAuc(absl::Span<const float> scores, absl::Span<const uint8_t> is_positive) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // Lowest score first: each positive beats the negatives below its score and ties with the
  // negatives at it.
  double negatives_below = 0, wins = 0, positives = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    double tied_positives = 0, tied_negatives = 0;
    for (; j < order.size() && scores[order[j]] == scores[order[i]]; ++j) {
      (is_positive[order[j]] != 0 ? tied_positives : tied_negatives) += 1;
    }
    wins += tied_positives * (negatives_below + tied_negatives / 2);
    negatives_below += tied_negatives;
    positives += tied_positives;
    i = j;
  }
  if (positives == 0 || negatives_below == 0) return 0;
  return wins / (positives * negatives_below);
}

double RankAmong(float positive, absl::Span<const float> negatives) {
  double greater = 0, equal = 0;
  for (float n : negatives) {
    greater += ScoresAbove(n, positive) ? 1 : 0;
    equal += ScoresLevel(n, positive) ? 1 : 0;
  }
  return 1 + greater + equal / 2;
}

double ExpectedHitsAmongSamples(double rank, int64_t candidates, int k, int samples) {
  if (candidates <= 0) return rank <= k ? 1.0 : 0.0;
  const double p = std::clamp((rank - 1) / static_cast<double>(candidates), 0.0, 1.0);
  if (p == 0) return k > 0 ? 1.0 : 0.0;
  if (p == 1) return samples < k ? 1.0 : 0.0;
  // Sum of C(samples, i) p^i (1 - p)^(samples - i) over i < k, in logs against overflow.
  double total = 0;
  for (int i = 0; i < std::min(k, samples + 1); ++i) {
    const double log_term = std::lgamma(samples + 1.0) - std::lgamma(i + 1.0) -
                            std::lgamma(samples - i + 1.0) + i * std::log(p) +
                            (samples - i) * std::log1p(-p);
    total += std::exp(log_term);
  }
  return std::min(1.0, total);
}

}  // namespace grail
