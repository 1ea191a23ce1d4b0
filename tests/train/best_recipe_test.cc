// grail-train --preset best's recipe (train/best_recipe.h): ULTRA fine-tuned, the path model and
// their ensemble, judged on held-out validation facts, the best kept; and what it refuses.
#include "train/best_recipe.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "model/families.h"
#include "model/ultra/ultra_model.h"
#include "tests/testing/rule_graph.h"
#include "tests/testing/small_ultra.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using Candidate = BestRecipeResult::Candidate;

TEST(ChooseBestTest, TheEnsembleOnlyWhenItBeatsTheBetterMemberByTheMargin) {
  EXPECT_EQ(ChooseBest({{"ultra", 0.5}, {"path", 0.6}, {"ensemble", 0.65}}, 0), "ensemble");
  EXPECT_EQ(ChooseBest({{"ultra", 0.5}, {"path", 0.6}, {"ensemble", 0.65}}, 0.1), "path");
  EXPECT_EQ(ChooseBest({{"ultra", 0.7}, {"path", 0.6}, {"ensemble", 0.65}}, 0), "ultra");
  EXPECT_EQ(ChooseBest({{"ultra", 0.6}, {"path", 0.6}, {"ensemble", 0.6}}, 0), "ultra");
}

class BestRecipeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const RuleGraph g = GenerateTypedRuleGraph(40, 1, "a");
    train_facts_ = g.body;
    for (size_t i = 0; i < g.targets.size(); ++i) {
      (i % 2 == 0 ? valid_ : train_facts_).push_back(g.targets[i]);
    }
    IndexTriples(train_facts_, &train_);
    ASSERT_TRUE(SaveSmallUltra(dir_.Sub("ultra.pt"), 3).ok());
  }

  BestRecipeOptions Options() const {
    BestRecipeOptions o;
    for (PathTrainOptions* t : {&o.ultra, &o.path}) {
      t->model.num_layers = 2;
      t->model.dim = 8;
      t->epochs = 2;
      t->batch_size = 16;
      t->negatives = 8;
      t->threads = 1;
      t->learning_rate = 5e-3;
      t->remove_one_hop = false;
    }
    o.ultra.epochs = 1;
    o.ultra.init = dir_.Sub("ultra.pt");
    o.time_budget_seconds = 3600;
    o.threads = 1;
    return o;
  }

  ScopedTempDir dir_;
  std::vector<NamedTriple> train_facts_, valid_;
  IndexedTriples train_;
};

// Every phase runs; each candidate has its figure; the one kept is the rule's choice among
// them and is what Save writes.
TEST_F(BestRecipeTest, JudgesTheThreeOnHeldOutFactsAndSavesTheOneKept) {
  std::vector<std::string> phases;
  std::vector<int> phase_epochs;
  int epochs = 0;
  absl::StatusOr<BestRecipeResult> result = RunBestRecipe(
      train_, train_facts_, valid_, Options(),
      [&](const std::string& what, int n) {
        phases.push_back(what);
        phase_epochs.push_back(n);
      },
      [&](const EpochReport&) { ++epochs; });
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_EQ(phases.size(), 3u);
  EXPECT_THAT(phases[0], HasSubstr("ULTRA"));
  EXPECT_THAT(phase_epochs, ElementsAre(1, 2, 0));
  EXPECT_EQ(epochs, 3);
  ASSERT_EQ(result->candidates.size(), 3u);
  EXPECT_EQ(result->candidates[0].name, "ultra");
  EXPECT_EQ(result->candidates[1].name, "path");
  EXPECT_EQ(result->candidates[2].name, "ensemble");
  EXPECT_EQ(result->candidates[0].epochs, 1);
  EXPECT_EQ(result->candidates[1].epochs, 2);
  for (const Candidate& c : result->candidates) {
    EXPECT_GT(c.judge_mrr, 0) << c.name;
    EXPECT_LE(c.judge_mrr, 1) << c.name;
  }
  EXPECT_EQ(result->judge_facts + result->fit_facts, valid_.size());
  EXPECT_EQ(result->judge_facts, valid_.size() / 2);
  EXPECT_EQ(result->chosen, ChooseBest(result->candidates, 0));
  EXPECT_EQ(result->ToJson(3600)["chosen"], result->chosen);
  EXPECT_EQ(result->ToJson(3600)["candidates"].size(), 3u);

  ASSERT_TRUE(result->Save(dir_.Sub("best.pt")).ok());
  absl::StatusOr<AnyModel> saved = LoadAnyModel(dir_.Sub("best.pt"));
  ASSERT_TRUE(saved.ok()) << saved.status();
  if (result->chosen == "ensemble") {
    ASSERT_NE(saved->ensemble, nullptr);
  } else {
    ASSERT_NE(saved->path, nullptr);
    EXPECT_EQ(saved->path->open_vocabulary(), result->chosen == "ultra");
  }
  EXPECT_EQ(result->num_parameters(),
            saved->ensemble ? saved->ensemble->num_parameters() : saved->path->num_parameters());

  // A margin no ensemble can pass keeps a member.
  BestRecipeOptions strict = Options();
  strict.margin = 1;
  absl::StatusOr<BestRecipeResult> kept = RunBestRecipe(train_, train_facts_, valid_, strict);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_NE(kept->chosen, "ensemble");
}

// Refused before anything trains: no ULTRA archive, another family's archive, too few
// validation facts, no budget.
TEST_F(BestRecipeTest, RefusesWhatItCannotRunBeforeTraining) {
  int epochs = 0;
  auto count = [&](const EpochReport&) { ++epochs; };
  BestRecipeOptions no_init = Options();
  no_init.ultra.init.clear();
  EXPECT_THAT(
      RunBestRecipe(train_, train_facts_, valid_, no_init, nullptr, count).status().message(),
      HasSubstr("ULTRA"));

  absl::StatusOr<std::unique_ptr<PathModel>> path =
      PathModel::Create(Options().path.model, train_.relations.names(), 1);
  ASSERT_TRUE(path.ok());
  ASSERT_TRUE((*path)->Save(dir_.Sub("path.pt")).ok());
  BestRecipeOptions not_ultra = Options();
  not_ultra.ultra.init = dir_.Sub("path.pt");
  EXPECT_THAT(
      RunBestRecipe(train_, train_facts_, valid_, not_ultra, nullptr, count).status().message(),
      HasSubstr("is not ULTRA's archive"));

  const std::vector<NamedTriple> few(valid_.begin(), valid_.begin() + 3);
  EXPECT_THAT(
      RunBestRecipe(train_, train_facts_, few, Options(), nullptr, count).status().message(),
      HasSubstr("at least 4 validation facts"));

  BestRecipeOptions no_budget = Options();
  no_budget.time_budget_seconds = 0;
  EXPECT_EQ(RunBestRecipe(train_, train_facts_, valid_, no_budget, nullptr, count).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(epochs, 0);
}

}  // namespace
}  // namespace grail
