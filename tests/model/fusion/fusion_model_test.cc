// Late fusion: the logistic classifier, the fusion archive, the choice between the fused score
// and GraIL's alone, and fitting on validation facts.
#include "model/fusion/fusion_model.h"

#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "model/families.h"
#include "model/fusion/linear_fusion.h"
#include "model/grail/fact_scoring.h"
#include "model/path/path_model.h"
#include "tests/testing/temp_dir.h"
#include "train/fusion_trainer.h"
#include "train/kge_trainer.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

TEST(LinearFusionTest, FitRecoversTheWeightsThatDrewTheLabels) {
  SeededRandom random(1);
  std::vector<std::vector<double>> x;
  std::vector<uint8_t> labels;
  for (int i = 0; i < 20000; ++i) {
    const double a = 2 * random.UniformDouble() - 1, b = 2 * random.UniformDouble() - 1;
    // The second column in other units: its weight must come out 100 times smaller.
    x.push_back({a, 100 * b});
    labels.push_back(random.UniformDouble() < Sigmoid(3 * a - 2 * b + 0.5) ? 1 : 0);
  }
  absl::StatusOr<LinearFusion> fit = FitLogistic(x, labels, /*l2=*/0);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_NEAR(fit->weights[0], 3, 0.25);
  EXPECT_NEAR(fit->weights[1], -0.02, 0.0025);
  EXPECT_NEAR(fit->bias, 0.5, 0.1);
  EXPECT_NEAR(fit->Logit(std::vector<double>{1, 100}),
              fit->weights[0] + 100 * fit->weights[1] + fit->bias, 1e-12);
}

TEST(LinearFusionTest, BadInputIsRefused) {
  EXPECT_FALSE(FitLogistic({}, {}).ok());
  EXPECT_THAT(FitLogistic({{1.0}, {2.0}}, std::vector<uint8_t>{1, 1}).status().message(),
              HasSubstr("both true and false"));
  EXPECT_THAT(FitLogistic({{1.0}, {2.0, 3.0}}, std::vector<uint8_t>{1, 0}).status().message(),
              HasSubstr("row 1 has 2 columns"));
  EXPECT_FALSE(FitLogistic({{1.0}}, std::vector<uint8_t>{1, 0}).ok());
}

TEST(FusionRowsTest, RestrictedKeepsTheChosenColumnsOfThePairsTheyAllKnow) {
  const double nan = std::nan("");
  FusionRows rows;
  rows.scores = {{1, 2, nan}, {3, 4, 5}, {6, 7, 8}, {9, 10, 11}};  // two fact-negative pairs
  rows.is_true = {1, 0, 1, 0};
  const FusionRows first_two = rows.Restricted(std::vector<size_t>{0, 1});
  EXPECT_EQ(first_two.scores, (std::vector<std::vector<double>>{{1, 2}, {3, 4}, {6, 7}, {9, 10}}));
  EXPECT_EQ(first_two.is_true, (std::vector<uint8_t>{1, 0, 1, 0}));
  // The first pair's fact lacks column 2: the whole pair goes, its negative too.
  const FusionRows last = rows.Restricted(std::vector<size_t>{2, 0});
  EXPECT_EQ(last.scores, (std::vector<std::vector<double>>{{8, 6}, {11, 9}}));
  EXPECT_EQ(last.is_true, (std::vector<uint8_t>{1, 0}));
}

// A graph over entities e0..e29 and relations r0, r1, s (a symmetric relation the KGE model
// learns), its names, and an untrained GraIL model and a DistMult model trained on it.
class FusedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SeededRandom random(3);
    std::vector<NamedTriple> facts;
    for (int i = 0; i < 120; ++i) {
      const uint64_t h = random.Uniform(30), t = random.Uniform(30);
      if (h == t) continue;
      facts.push_back(
          {absl::StrCat("e", h), absl::StrCat("r", random.Uniform(2)), absl::StrCat("e", t)});
    }
    std::set<std::pair<uint64_t, uint64_t>> pairs;  // symmetric; 10 reverses held out
    while (pairs.size() < 40) {
      const uint64_t a = random.Uniform(30), b = random.Uniform(30);
      if (a < b) pairs.insert({a, b});
    }
    int i = 0;
    for (const auto& [a, b] : pairs) {
      facts.push_back({absl::StrCat("e", a), "s", absl::StrCat("e", b)});
      (i++ < 30 ? facts : held_).push_back({absl::StrCat("e", b), "s", absl::StrCat("e", a)});
    }
    IndexTriples(facts, &indexed_);
    graph_ = std::make_unique<StaticGraph>(indexed_.entities.size(), indexed_.triples);
    for (const NamedTriple& f : held_) {
      auto h = indexed_.entities.Find(f.head);
      auto r = indexed_.relations.Find(f.relation);
      auto t = indexed_.entities.Find(f.tail);
      if (h && r && t && !graph_->HasFact(*h, *r, *t)) held_ids_.push_back({*h, *r, *t});
    }
    ASSERT_GE(held_ids_.size(), 8u);
  }

  std::unique_ptr<FusionModel> Make() {
    GrailConfig config;
    config.hops = 2;
    std::unique_ptr<GrailModel> grail =
        *GrailModel::Create(config, indexed_.relations.names(), /*seed=*/5);
    KgeTrainOptions options;
    options.model.kind = KgeKind::kDistMult;
    options.model.dim = 16;
    options.epochs = 60;
    options.batch_size = 64;
    options.negatives = 16;
    options.learning_rate = 0.02;
    options.eval_every = 1000;
    options.threads = 1;
    std::vector<std::unique_ptr<KgeModel>> kge;
    kge.push_back(*TrainKge(indexed_, {}, options));
    return *FusionModel::Create(std::move(grail), std::move(kge), LinearFusion{{0.5, 2.0}, -1.0},
                                LinearFusion{{0.25}, 0.5});
  }

  IndexedTriples indexed_;
  std::unique_ptr<StaticGraph> graph_;
  std::vector<NamedTriple> held_;
  std::vector<Triple> held_ids_;
};

TEST_F(FusedModelTest, AFactEveryMemberKnowsIsFusedAndAnotherIsGrailAlone) {
  std::unique_ptr<FusionModel> model = Make();
  // The graph's vocabulary with one more entity, "fresh", that the KGE model never saw.
  std::vector<std::string> entities = indexed_.entities.names();
  entities.push_back("fresh");
  const StaticGraph graph(static_cast<uint32_t>(entities.size()), indexed_.triples);
  const FusionVocabulary vocabulary = model->MapVocabulary(entities, indexed_.relations.names());
  const EntityId fresh = static_cast<EntityId>(entities.size() - 1);
  const std::vector<Triple> facts = {held_ids_[0], {fresh, 0, 1}, held_ids_[1]};
  absl::StatusOr<FusedScores> scores = model->Score(graph, {}, vocabulary, facts, {});
  ASSERT_TRUE(scores.ok()) << scores.status();
  EXPECT_EQ(scores->fused, (std::vector<uint8_t>{1, 0, 1}));

  // The same numbers from the members directly.
  const std::vector<float> grail = *ScoreGrailFacts(model->grail(), graph, {}, facts, {});
  for (size_t i : {0, 2}) {
    const Triple& f = facts[i];
    const float kge = (*model->kge()[0]->ScoreGrailFacts(
        std::vector<Triple>{{static_cast<EntityId>(vocabulary.entity[0][f.head]),
                             static_cast<RelationId>(vocabulary.relation[0][f.relation]),
                             static_cast<EntityId>(vocabulary.entity[0][f.tail])}}))[0];
    EXPECT_NEAR(scores->score[i], 0.5 * grail[i] + 2.0 * kge - 1.0, 1e-4);
  }
  EXPECT_NEAR(scores->score[1], 0.25 * grail[1] + 0.5, 1e-5);
}

// What grail-server uses: the KGE scores of facts given by name (a row per fact, empty when a
// member lacks a name) and the one formula that combines them with GraIL's.
TEST_F(FusedModelTest, KgeScoresByNameAndCombineGiveScoresFused) {
  std::unique_ptr<FusionModel> model = Make();
  const NamedTriple& known = held_[0];
  const std::vector<FactNames> facts = {{known.head, known.relation, known.tail},
                                        {"fresh", known.relation, known.tail},
                                        {known.head, "no such relation", known.tail}};
  absl::StatusOr<std::vector<std::vector<double>>> rows = model->KgeScores(facts);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 3u);
  ASSERT_EQ((*rows)[0].size(), 1u);
  EXPECT_TRUE((*rows)[1].empty());
  EXPECT_TRUE((*rows)[2].empty());
  const std::optional<std::vector<Triple>> ids =
      model->MemberFacts(known.head, known.relation, known.tail);
  ASSERT_TRUE(ids.has_value());
  EXPECT_EQ((*rows)[0][0], (*model->kge()[0]->ScoreGrailFacts(*ids))[0]);
  EXPECT_FALSE(model->MemberFacts("fresh", known.relation, known.tail).has_value());

  EXPECT_FLOAT_EQ(model->Combine(3.0, (*rows)[0]), 0.5 * 3.0 + 2.0 * (*rows)[0][0] - 1.0);
  EXPECT_FLOAT_EQ(model->Combine(3.0, {}), 0.25 * 3.0 + 0.5);
}

TEST_F(FusedModelTest, ArchivesRoundTripAndNameTheirFamily) {
  std::unique_ptr<FusionModel> model = Make();
  const std::string path = ProcessTempPath("fused.pt");
  ASSERT_TRUE(model->Save(path).ok());
  absl::StatusOr<AnyModel> any = LoadAnyModel(path);
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->family(), ModelFamily::kFusion);
  const FusionModel& loaded = *any->fusion;
  EXPECT_EQ(loaded.fused_classifier().weights, (std::vector<double>{0.5, 2.0}));
  EXPECT_EQ(loaded.grail_classifier().bias, 0.5);
  ASSERT_EQ(loaded.kge().size(), 1u);
  const FusionVocabulary vocabulary =
      loaded.MapVocabulary(indexed_.entities.names(), indexed_.relations.names());
  EXPECT_EQ(loaded.Score(*graph_, {}, vocabulary, held_ids_, {})->score,
            model->Score(*graph_, {}, vocabulary, held_ids_, {})->score);
  EXPECT_THAT(GrailModel::Load(path).status().message(), HasSubstr("not a"));
  std::filesystem::remove(path);
}

// With an untrained GraIL and a KGE model that learnt the symmetric relation, the fit leans
// on the KGE model, and the fusion separates validation facts from negatives at least as
// well as the better member.
TEST_F(FusedModelTest, FittingWeighsTheInformativeMemberAndMatchesTheBetterOne) {
  std::unique_ptr<FusionModel> model = Make();
  const FusionVocabulary vocabulary =
      model->MapVocabulary(indexed_.entities.names(), indexed_.relations.names());
  absl::StatusOr<FusionFit> fit =
      FitFusion(*model, *graph_, {}, vocabulary, held_ids_, /*seed=*/2, {});
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->facts, static_cast<int64_t>(held_ids_.size()));
  EXPECT_EQ(fit->fused_facts, fit->facts);
  ASSERT_EQ(fit->member_auc_pr.size(), 2u);
  EXPECT_GT(fit->member_auc_pr[1], fit->member_auc_pr[0]);
  EXPECT_GT(fit->fused.weights[1], 0);
  EXPECT_GE(fit->fused_auc_pr, fit->member_auc_pr[1] - 1e-9);
  ASSERT_TRUE(model->SetClassifiers(fit->fused, fit->grail_only).ok());
  EXPECT_FALSE(model->SetClassifiers(fit->grail_only, fit->grail_only).ok());
}

}  // namespace
}  // namespace grail
