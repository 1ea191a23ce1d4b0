// A challenger fine-tuned from the served archive on the live graph's facts, judged with the
// champion on the newest facts (train/challenger.h): how the facts split by age, that a
// fine-tune which learns beats an untrained champion, the recipes, and what it refuses.
#include "train/challenger.h"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/families.h"
#include "tests/testing/rule_graph.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/small_ultra.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ChallengerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    facts_ = RuleGraphStream(60, 3, 7, "e");
    IndexedTriples indexed;
    IndexTriples(facts_, &indexed);
    ASSERT_TRUE(
        SaveUntrainedPathModel(dir_.Sub("champion.pt"), indexed.relations.names(), 11, /*layers=*/2)
            .ok());
  }

  ChallengeOptions Options() const {
    ChallengeOptions o;
    o.recipe.init = dir_.Sub("champion.pt");
    o.recipe.epochs = 4;
    o.recipe.batch_size = 16;
    o.recipe.negatives = 8;
    o.recipe.learning_rate = 5e-3;
    o.recipe.threads = 1;
    o.recipe.remove_one_hop = false;
    o.judge_facts = 30;
    o.valid_facts = 20;
    o.eval_threads = 1;
    return o;
  }

  ScopedTempDir dir_;
  std::vector<NamedTriple> facts_;
};

TEST_F(ChallengerTest, SplitsTheFactsByAgeAndAFineTuneThatLearnsBeatsAnUntrainedChampion) {
  int epochs_reported = 0;
  absl::StatusOr<Challenge> challenge =
      RunChallenge(facts_, Options(), [&](const EpochReport&) { ++epochs_reported; });
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  EXPECT_EQ(challenge->judge_facts, 30u);
  EXPECT_EQ(challenge->valid_facts, 20u);
  EXPECT_EQ(challenge->train_facts, facts_.size() - 50);
  EXPECT_EQ(challenge->epochs, 4);
  EXPECT_EQ(epochs_reported, 4);
  EXPECT_TRUE(challenge->finite);
  ASSERT_TRUE(challenge->champion.full.has_value());
  ASSERT_TRUE(challenge->challenger.full.has_value());
  // Both ranked the same judge facts: those the older graph can rank.
  EXPECT_EQ(challenge->champion.n, challenge->challenger.n);
  EXPECT_EQ(static_cast<size_t>(challenge->champion.n) + challenge->judge_unrankable, 30u);
  EXPECT_GT(challenge->challenger_mrr(), challenge->champion_mrr() + 0.05)
      << challenge->ToJson().dump();
  const Json report = challenge->ToJson();
  EXPECT_EQ(report["judge_facts"], 30);
  EXPECT_DOUBLE_EQ(report["challenger"]["mrr"].get<double>(), challenge->challenger_mrr());
}

TEST_F(ChallengerTest, EachHeldOutPartIsCappedByItsShareOfTheFacts) {
  ChallengeOptions options = Options();
  options.judge_facts = 1000;
  options.valid_facts = 1000;
  options.recipe.epochs = 1;
  absl::StatusOr<Challenge> challenge = RunChallenge(facts_, options);
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  const size_t cap = facts_.size() / 10;
  EXPECT_EQ(challenge->judge_facts, cap);
  EXPECT_EQ(challenge->valid_facts, cap);
  EXPECT_EQ(challenge->train_facts, facts_.size() - 2 * cap);
}

TEST_F(ChallengerTest, RefusesTooFewFactsAndAnArchiveThatIsNotThere) {
  const std::vector<NamedTriple> few(facts_.begin(), facts_.begin() + 11);
  absl::StatusOr<Challenge> challenge = RunChallenge(few, Options());
  EXPECT_EQ(challenge.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(challenge.status().message()), HasSubstr("too few facts"));
  ChallengeOptions missing = Options();
  missing.recipe.init = dir_.Sub("nothing.pt");
  EXPECT_FALSE(RunChallenge(facts_, missing).ok());
}

// A challenge whose models ranked lists with these reciprocal ranks.
Challenge Judged(std::vector<double> champion, std::vector<double> challenger) {
  Challenge c;
  for (auto [result, rr] :
       {std::pair{&c.champion, &champion}, std::pair{&c.challenger, &challenger}}) {
    FullRanking& full = result->full.emplace();
    for (double r : *rr) full.mrr += r / rr->size();
    full.reciprocal_ranks = *rr;
  }
  return c;
}

TEST(ChallengeTest, ThePromotionRuleWantsTheMarginAndZStandardErrorsOfThePairedGain) {
  // The same gain of 0.1 on every list: no spread, so any z passes, and the margin decides.
  const Challenge steady = Judged({0.5, 0.2, 0.4, 0.1}, {0.6, 0.3, 0.5, 0.2});
  EXPECT_NEAR(steady.gain(), 0.1, 1e-12);
  EXPECT_NEAR(steady.gain_standard_error(), 0, 1e-12);
  EXPECT_TRUE(steady.Beats(0.05, 2));
  EXPECT_FALSE(steady.Beats(0.15, 0));
  // The same mean gain from one list: differences 0.4, 0, 0, 0 have a standard deviation of
  // 0.2, so a standard error of 0.1; the gain of 0.1 is one of them.
  const Challenge lucky = Judged({0.5, 0.2, 0.4, 0.1}, {0.9, 0.2, 0.4, 0.1});
  EXPECT_NEAR(lucky.gain(), 0.1, 1e-12);
  EXPECT_NEAR(lucky.gain_standard_error(), 0.1, 1e-12);
  EXPECT_TRUE(lucky.Beats(0.05, 0.5));
  EXPECT_FALSE(lucky.Beats(0.05, 2));
  // A challenger that is not finite never beats.
  Challenge diverged = Judged({0.5, 0.2, 0.4, 0.1}, {0.6, 0.3, 0.5, 0.2});
  diverged.finite = false;
  EXPECT_FALSE(diverged.Beats(0, 0));
}

TEST(SplitByAgeTest, TheJudgeIsTheNewestFactsRankableOnTheGraphBeforeThem) {
  const std::vector<NamedTriple> facts = {
      {"a", "r", "b"}, {"b", "r", "c"}, {"c", "r", "a"},
      {"a", "s", "c"}, {"d", "r", "a"},                   // d is new
      {"d", "s", "b"}, {"b", "s", "a"}, {"e", "r", "a"},  // e is new
  };
  const AgeSplit split = SplitByAge(facts, 2, 1, 1.0);
  // The judge's window is facts 5..7: 7 names e, new there, so it trains; 5 and 6 judge
  // (d first appears at 4, before the window). The validation window before it is 3..4:
  // 4 brings d, so 3 validates.
  EXPECT_THAT(split.judge, ElementsAre(5, 6));
  EXPECT_THAT(split.valid, ElementsAre(3));
  EXPECT_THAT(split.train, ElementsAre(0, 1, 2, 4, 7));
  EXPECT_EQ(split.moved_to_train, 2u);
  // A window reaches back no further than its share: then it holds what it found.
  const AgeSplit short_window = SplitByAge(facts, 5, 0, 0.25);  // two facts back
  EXPECT_THAT(short_window.judge, ElementsAre(6));
  EXPECT_THAT(short_window.valid, ::testing::IsEmpty());
  EXPECT_EQ(short_window.train.size(), 7u);
}

TEST(FineTuneRecipeTest, UltraGetsItsRecipeAndAPathModelThePresetsStepAtTheFineTuningRate) {
  ScopedTempDir dir;
  ASSERT_TRUE(SaveSmallUltra(dir.Sub("ultra.pt"), 3).ok());
  absl::StatusOr<AnyModel> ultra = LoadAnyModel(dir.Sub("ultra.pt"));
  ASSERT_TRUE(ultra.ok() && ultra->path != nullptr);
  PathTrainOptions base;
  base.seed = 9;
  base.threads = 3;
  base.time_budget_seconds = 60;
  const PathTrainOptions u = FineTuneRecipe(*ultra->path, base);
  EXPECT_EQ(u.epochs, 5);
  EXPECT_EQ(u.batch_size, 16);
  EXPECT_DOUBLE_EQ(u.learning_rate, 5e-4);
  EXPECT_DOUBLE_EQ(u.adversarial_temperature, 1.0);
  EXPECT_FALSE(u.remove_one_hop);
  absl::StatusOr<std::unique_ptr<PathModel>> path =
      PathModel::Create(PathConfig(), {"r1", "r2"}, 1);
  ASSERT_TRUE(path.ok());
  const PathTrainOptions p = FineTuneRecipe(**path, base);
  EXPECT_EQ(p.batch_size, 64);
  EXPECT_DOUBLE_EQ(p.learning_rate, 5e-4);
  EXPECT_DOUBLE_EQ(p.adversarial_temperature, 0.5);
  for (const PathTrainOptions& o : {u, p}) {  // the run's own settings kept
    EXPECT_EQ(o.seed, 9u);
    EXPECT_EQ(o.threads, 3);
    EXPECT_DOUBLE_EQ(o.time_budget_seconds, 60);
  }
}

}  // namespace
}  // namespace grail
