#include "client/latency_stats.h"

#include <algorithm>
#include <cmath>

namespace grail {

double NearestRankPercentile(absl::Span<const double> sorted, double percentile) {
  const size_t n = sorted.size();
  const double clamped = std::clamp(percentile, 0.0, 100.0);
  // The 1e-9 keeps p * n that is an integer in exact arithmetic (e.g. 0.9 * 10) from being
  // rounded up by its binary representation.
  size_t rank = static_cast<size_t>(std::ceil(clamped / 100.0 * static_cast<double>(n) - 1e-9));
  rank = std::clamp<size_t>(rank, 1, n);
  return sorted[rank - 1];
}

LatencySummary SummarizeLatencies(std::vector<double> samples) {
  LatencySummary summary;
  summary.count = samples.size();
  if (samples.empty()) return summary;
  std::sort(samples.begin(), samples.end());
  double sum = 0;
  for (double s : samples) sum += s;
  summary.min = samples.front();
  summary.max = samples.back();
  summary.mean = sum / static_cast<double>(samples.size());
  summary.p50 = NearestRankPercentile(samples, 50);
  summary.p90 = NearestRankPercentile(samples, 90);
  summary.p99 = NearestRankPercentile(samples, 99);
  return summary;
}

}  // namespace grail
