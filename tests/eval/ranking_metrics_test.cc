#include "eval/ranking_metrics.h"

#include <cmath>
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

TEST(RocAucTest, IsTheShareOfPositiveNegativePairsInOrder) {
  EXPECT_DOUBLE_EQ(
      RocAuc(std::vector<float>{0.9f, 0.8f, 0.1f, 0.2f}, std::vector<uint8_t>{1, 1, 0, 0}), 1.0);
  // Ranked +, -, +, -: of the four pairs, (first +, both -) and (second +, last -) are in
  // order.
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<float>{4, 3, 2, 1}, std::vector<uint8_t>{1, 0, 1, 0}),
                   3.0 / 4.0);
  // Ties count one half, whatever their order in the input.
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<float>{1, 1, 1, 1}, std::vector<uint8_t>{1, 0, 1, 0}), 0.5);
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<float>{2, 1, 1}, std::vector<uint8_t>{1, 0, 1}),
                   (1.0 + 0.5) / 2.0);
  EXPECT_DOUBLE_EQ(RocAuc(std::vector<float>{2, 1, 1}, std::vector<uint8_t>{1, 1, 0}),
                   (1.0 + 0.5) / 2.0);
}

TEST(RocAucTest, OneClassOnlyGivesZero) {
  EXPECT_EQ(RocAuc(std::vector<float>{1, 2}, std::vector<uint8_t>{0, 0}), 0.0);
  EXPECT_EQ(RocAuc(std::vector<float>{1, 2}, std::vector<uint8_t>{1, 1}), 0.0);
}

TEST(RankAmongTest, CountsStrictlyBetterNegatives) {
  EXPECT_EQ(RankAmong(5, std::vector<float>{1, 2, 3}), 1.0);
  EXPECT_EQ(RankAmong(2.5f, std::vector<float>{1, 2, 3, 4}), 3.0);
}

TEST(RankAmongTest, NanIsTheLowestScoreSoADivergedAnswerRanksLast) {
  const float nan = std::nanf("");
  EXPECT_EQ(RankAmong(nan, std::vector<float>{1, 2, 3}), 4.0);
  EXPECT_EQ(RankAmong(nan, std::vector<float>{1, nan, nan}), 3.0);  // level with the NaNs
  EXPECT_EQ(RankAmong(0, std::vector<float>{nan, 1, nan}), 2.0);    // NaN candidates below
}

TEST(RankAmongTest, TiesTakeTheMeanOfOptimisticAndPessimisticRank) {
  // Optimistic rank 2 (one better), pessimistic 4 (two more tied): mean 3.
  EXPECT_EQ(RankAmong(2, std::vector<float>{3, 2, 2, 1}), 3.0);
  // A constant model does not rank the positive first among 49 equal negatives.
  EXPECT_EQ(RankAmong(0, std::vector<float>(49, 0.0f)), 25.5);
}

// Every draw of `samples` negatives (with replacement) from `candidates` entities, of which
// the first `rank - 1` outrank the positive: the share of draws that keep it in the top k.
double HitsOverEveryDraw(int rank, int candidates, int k, int samples) {
  int64_t draws = 1, hits = 0;
  for (int i = 0; i < samples; ++i) draws *= candidates;
  for (int64_t draw = 0; draw < draws; ++draw) {
    int outranking = 0;
    for (int64_t rest = draw, i = 0; i < samples; ++i, rest /= candidates) {
      outranking += rest % candidates < rank - 1 ? 1 : 0;
    }
    hits += 1 + outranking <= k ? 1 : 0;
  }
  return static_cast<double>(hits) / static_cast<double>(draws);
}

TEST(ExpectedHitsAmongSamplesTest, IsTheShareOfEveryPossibleDrawThatKeepsThePositiveInTheTopK) {
  for (int rank = 1; rank <= 7; ++rank) {
    for (int k : {1, 2, 3}) {
      EXPECT_NEAR(ExpectedHitsAmongSamples(rank, 6, k, 4), HitsOverEveryDraw(rank, 6, k, 4), 1e-12)
          << "rank " << rank << ", k " << k;
    }
  }
}

TEST(ExpectedHitsAmongSamplesTest, FiftySamplesTopTen) {
  // Ranked first: no sample can outrank it. Outranked by a fifth: P(Binomial(50, 0.2) <= 9).
  EXPECT_DOUBLE_EQ(ExpectedHitsAmongSamples(1, 1000, 10, 50), 1.0);
  double binomial = 0;
  for (int i = 0; i < 10; ++i) {
    binomial += std::tgamma(51.0) / std::tgamma(i + 1.0) / std::tgamma(51.0 - i) *
                std::pow(0.2, i) * std::pow(0.8, 50 - i);
  }
  EXPECT_NEAR(ExpectedHitsAmongSamples(201, 1000, 10, 50), binomial, 1e-9);
  EXPECT_NEAR(binomial, 0.4437, 1e-3);
  // Outranked by every candidate: ten or more of the fifty samples always outrank it.
  EXPECT_DOUBLE_EQ(ExpectedHitsAmongSamples(1001, 1000, 10, 50), 0.0);
}

}  // namespace
}  // namespace grail
