// Latency percentiles for the load generator.
//
// Percentiles use the nearest-rank definition: the p-th percentile of n samples is the
// smallest sample that at least p% of the samples are less than or equal to, i.e. the
// ceil(p/100 * n)-th smallest (the minimum for p = 0). It is always one of the measured
// values, never an interpolation between two.
#ifndef GRAIL_CLIENT_LATENCY_STATS_H_
#define GRAIL_CLIENT_LATENCY_STATS_H_

#include <cstddef>
#include <vector>

#include "absl/types/span.h"

namespace grail {

// The nearest-rank `percentile` (0..100) of `sorted` (ascending, non-empty).
double NearestRankPercentile(absl::Span<const double> sorted, double percentile);

struct LatencySummary {
  size_t count = 0;
  // All 0 when count is 0.
  double min = 0;
  double mean = 0;
  double p50 = 0;
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

// Summarises `samples` (any unit, any order).
LatencySummary SummarizeLatencies(std::vector<double> samples);

}  // namespace grail

#endif  // GRAIL_CLIENT_LATENCY_STATS_H_
