#include "client/latency_stats.h"

#include <vector>

#include "gtest/gtest.h"

namespace grail {
namespace {

std::vector<double> OneTo(int n) {
  std::vector<double> values;
  for (int i = 1; i <= n; ++i) values.push_back(i);
  return values;
}

TEST(NearestRankPercentileTest, OneToHundredGivesThePercentileItself) {
  const std::vector<double> values = OneTo(100);
  EXPECT_EQ(NearestRankPercentile(values, 50), 50);
  EXPECT_EQ(NearestRankPercentile(values, 90), 90);
  EXPECT_EQ(NearestRankPercentile(values, 99), 99);
  EXPECT_EQ(NearestRankPercentile(values, 100), 100);
  EXPECT_EQ(NearestRankPercentile(values, 0), 1);
}

TEST(NearestRankPercentileTest, RoundsTheRankUpNeverInterpolates) {
  const std::vector<double> values = OneTo(10);
  EXPECT_EQ(NearestRankPercentile(values, 50), 5);   // rank 5
  EXPECT_EQ(NearestRankPercentile(values, 90), 9);   // rank 9, exactly
  EXPECT_EQ(NearestRankPercentile(values, 91), 10);  // rank 9.1 -> 10
  EXPECT_EQ(NearestRankPercentile(values, 99), 10);
  EXPECT_EQ(NearestRankPercentile(values, 10), 1);
  EXPECT_EQ(NearestRankPercentile(values, 11), 2);
}

TEST(NearestRankPercentileTest, SingleSampleIsEveryPercentile) {
  const std::vector<double> values = {7.5};
  EXPECT_EQ(NearestRankPercentile(values, 0), 7.5);
  EXPECT_EQ(NearestRankPercentile(values, 99), 7.5);
}

TEST(SummarizeLatenciesTest, SortsItsInputAndReportsEveryStatistic) {
  // 1..1000 shuffled deterministically (stride 7 is coprime with 1000).
  std::vector<double> samples;
  for (int i = 0; i < 1000; ++i) samples.push_back((i * 7) % 1000 + 1);
  const LatencySummary summary = SummarizeLatencies(samples);
  EXPECT_EQ(summary.count, 1000u);
  EXPECT_EQ(summary.min, 1);
  EXPECT_EQ(summary.max, 1000);
  EXPECT_DOUBLE_EQ(summary.mean, 500.5);
  EXPECT_EQ(summary.p50, 500);
  EXPECT_EQ(summary.p90, 900);
  EXPECT_EQ(summary.p99, 990);
}

TEST(SummarizeLatenciesTest, ASlowTailShowsInP99AndMaxOnly) {
  std::vector<double> samples(98, 1.0);
  samples.push_back(50.0);
  samples.push_back(200.0);
  const LatencySummary summary = SummarizeLatencies(samples);
  EXPECT_EQ(summary.p50, 1.0);
  EXPECT_EQ(summary.p90, 1.0);
  EXPECT_EQ(summary.p99, 50.0);
  EXPECT_EQ(summary.max, 200.0);
}

TEST(SummarizeLatenciesTest, NoSamplesIsAllZero) {
  const LatencySummary summary = SummarizeLatencies({});
  EXPECT_EQ(summary.count, 0u);
  EXPECT_EQ(summary.p99, 0);
  EXPECT_EQ(summary.max, 0);
}

}  // namespace
}  // namespace grail
