#include "model/ranking_metrics.h"

#include <vector>

#include "gtest/gtest.h"

namespace grail {
namespace {

TEST(AveragePrecisionTest, PerfectSeparationIsOne) {
  EXPECT_DOUBLE_EQ(AveragePrecision(std::vector<float>{0.9f, 0.8f, 0.1f, 0.2f},
                                    std::vector<uint8_t>{1, 1, 0, 0}),
                   1.0);
}

TEST(AveragePrecisionTest, MatchesAHandComputedRanking) {
  // Ranked: +, -, +, - : precision at the positives 1/1 and 2/3, each recall step 1/2.
  const double ap =
      AveragePrecision(std::vector<float>{4, 3, 2, 1}, std::vector<uint8_t>{1, 0, 1, 0});
  EXPECT_DOUBLE_EQ(ap, 0.5 * 1.0 + 0.5 * (2.0 / 3.0));
}

TEST(AveragePrecisionTest, TiedScoresEnterTogether) {
  // All tied: one threshold with precision 1/2 at recall 1.
  EXPECT_DOUBLE_EQ(
      AveragePrecision(std::vector<float>{1, 1, 1, 1}, std::vector<uint8_t>{1, 0, 1, 0}), 0.5);
  // The order of tied items in the input does not matter.
  EXPECT_DOUBLE_EQ(AveragePrecision(std::vector<float>{2, 1, 1}, std::vector<uint8_t>{0, 1, 0}),
                   AveragePrecision(std::vector<float>{2, 1, 1}, std::vector<uint8_t>{0, 0, 1}));
}

TEST(AveragePrecisionTest, NoPositiveGivesZero) {
  EXPECT_EQ(AveragePrecision(std::vector<float>{1, 2}, std::vector<uint8_t>{0, 0}), 0.0);
}

TEST(RankAmongTest, CountsStrictlyBetterNegatives) {
  EXPECT_EQ(RankAmong(5, std::vector<float>{1, 2, 3}), 1.0);
  EXPECT_EQ(RankAmong(2.5f, std::vector<float>{1, 2, 3, 4}), 3.0);
}

TEST(RankAmongTest, TiesTakeTheMeanOfOptimisticAndPessimisticRank) {
  // Optimistic rank 2 (one better), pessimistic 4 (two more tied): mean 3.
  EXPECT_EQ(RankAmong(2, std::vector<float>{3, 2, 2, 1}), 3.0);
  // A constant model does not rank the positive first among 49 equal negatives.
  EXPECT_EQ(RankAmong(0, std::vector<float>(49, 0.0f)), 25.5);
}

}  // namespace
}  // namespace grail
