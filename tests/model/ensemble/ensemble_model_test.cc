// Ensembles (model/ensemble/) of path-family, GraIL and KGE models: the archive, the rule's fit,
// and the evaluation that combines the members' scores (eval/ensemble_evaluation.h).
#include "model/ensemble/ensemble_model.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/seeded_random.h"
#include "eval/ensemble_evaluation.h"
#include "eval/path_evaluation.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/ensemble/ensemble_fit.h"
#include "model/families.h"
#include "model/grail/enclosing_subgraph.h"
#include "model/kge/kge_model.h"
#include "tests/testing/grail_own_scores.h"
#include "tests/testing/path_test_graph.h"
#include "tests/testing/small_ultra.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<std::string> kGraphRelations = {"r0", "r1", "r2", "r3"};

// The names of `graph`'s entities: "e0", "e1", ...
std::vector<std::string> EntityNames(const GraphView& graph) {
  std::vector<std::string> names;
  for (EntityId e = 0; e < graph.num_entities(); ++e) names.push_back("e" + std::to_string(e));
  return names;
}

std::unique_ptr<PathModel> PathMember(std::vector<std::string> relations, uint64_t seed) {
  PathConfig c;
  c.num_layers = 2;
  c.dim = 8;
  absl::StatusOr<std::unique_ptr<PathModel>> m = PathModel::Create(c, std::move(relations), seed);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

std::unique_ptr<PathModel> UltraMember(uint64_t seed) {
  absl::StatusOr<std::unique_ptr<PathModel>> m = CreateUltraModel(SmallUltraConfig(), seed);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

// A small GraIL model of one hop: from a source, the entities within two hops are scored on
// their own subgraphs and the others share the trivial one's score.
std::unique_ptr<GrailModel> GrailMember(std::vector<std::string> relations, uint64_t seed) {
  GrailConfig c;
  c.hops = 1;
  c.num_layers = 2;
  c.dim = 8;
  c.relation_dim = 8;
  absl::StatusOr<std::unique_ptr<GrailModel>> m = GrailModel::Create(c, std::move(relations), seed);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

// A small KGE model (RotatE) that knows the graph's entities e0..e{known - 1}, in reverse
// order (its ids are not the graph's), and `relations`.
std::unique_ptr<KgeModel> KgeMember(std::vector<std::string> relations, int known, uint64_t seed) {
  KgeConfig c;
  c.kind = KgeKind::kRotatE;  // not symmetric: a head query differs from a tail query
  c.dim = 8;
  std::vector<std::string> entities;
  for (int e = known - 1; e >= 0; --e) entities.push_back("e" + std::to_string(e));
  absl::StatusOr<std::unique_ptr<KgeModel>> m =
      KgeModel::Create(c, std::move(entities), std::move(relations), seed);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

// The KGE member m's score of (head, relation, tail) in graph ids and names, or nullopt if it
// does not know one of them.
std::optional<float> KgeScore(const EnsembleModel& ensemble, size_t m, EntityId head,
                              const std::string& relation, EntityId tail) {
  const KgeModel& kge = *ensemble.kge_member(m);
  const auto r = std::find(kge.relations().begin(), kge.relations().end(), relation);
  const std::optional<uint32_t> h = ensemble.KgeEntity(m, "e" + std::to_string(head));
  const std::optional<uint32_t> t = ensemble.KgeEntity(m, "e" + std::to_string(tail));
  if (!h || !t || r == kge.relations().end()) return std::nullopt;
  absl::StatusOr<std::vector<float>> scores =
      kge.ScoreGrailFacts({Triple{*h, static_cast<RelationId>(r - kge.relations().begin()), *t}});
  EXPECT_TRUE(scores.ok()) << scores.status();
  return (*scores)[0];
}

std::unique_ptr<EnsembleModel> Ensemble(std::vector<EnsembleMember> members, LinearFusion rule,
                                        std::vector<double> unknown = {}) {
  absl::StatusOr<std::unique_ptr<EnsembleModel>> e =
      EnsembleModel::Create(std::move(members), std::move(rule), std::move(unknown));
  EXPECT_TRUE(e.ok()) << e.status();
  return *std::move(e);
}

std::unique_ptr<EnsembleModel> Ensemble(std::vector<std::unique_ptr<PathModel>> members,
                                        LinearFusion rule) {
  absl::StatusOr<std::unique_ptr<EnsembleModel>> e =
      EnsembleModel::Create(std::move(members), std::move(rule));
  EXPECT_TRUE(e.ok()) << e.status();
  return *std::move(e);
}

// Every entity's score for `query` (graph ids) by `model` alone.
std::vector<float> MemberScores(const PathModel& model, const GraphView& graph,
                                const RelationMap& relations, const PathQuery& query) {
  PathNeighbourhoodSpec spec = model.Neighbourhood(&graph, &relations, 0);
  PathBatchBuilder builder;
  PathBatch batch;
  EXPECT_TRUE(builder.Build(spec, {query}, &batch).ok());
  absl::StatusOr<PathScores> scores = model.Score(batch);
  EXPECT_TRUE(scores.ok()) << scores.status();
  std::vector<float> out;
  for (EntityId e = 0; e < graph.num_entities(); ++e) out.push_back(scores->Of(batch, 0, e));
  return out;
}

// `ensemble` saved and loaded back as any archive is (null, and a test failure, if it was not).
std::unique_ptr<EnsembleModel> SavedAndLoaded(const EnsembleModel& ensemble) {
  ScopedTempDir dir;
  const absl::Status saved = ensemble.Save(dir.Sub("ensemble.pt"));
  EXPECT_TRUE(saved.ok()) << saved;
  absl::StatusOr<AnyModel> loaded = LoadAnyModel(dir.Sub("ensemble.pt"));
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return nullptr;
  EXPECT_NE(loaded->ensemble, nullptr);
  return std::move(loaded->ensemble);
}

// Every entity's combined score for each of `queries` (RunEnsembleQueries, two workers).
std::vector<std::vector<float>> Combined(const EnsembleModel& ensemble, const GraphView& graph,
                                         absl::Span<const RankingQuery> queries) {
  std::vector<std::vector<float>> combined(queries.size());
  PathScoringOptions options;
  options.threads = 2;
  const absl::Status ran =
      RunEnsembleQueries(ensemble, graph, EntityNames(graph), kGraphRelations, queries, options,
                         [&](size_t i, const QueryScores& scores) {
                           for (EntityId e = 0; e < graph.num_entities(); ++e)
                             combined[i].push_back(scores.Of(e));
                         });
  EXPECT_TRUE(ran.ok()) << ran;
  return combined;
}

TEST(EnsembleModelTest, AnArchiveKeepsItsMembersRuleAndTheRelationsEveryMemberKnows) {
  std::vector<std::unique_ptr<PathModel>> members;
  members.push_back(PathMember({"r0", "r1", "r2"}, 1));
  members.push_back(UltraMember(2));
  members.push_back(PathMember({"r3", "r2", "r1"}, 3));
  std::unique_ptr<EnsembleModel> ensemble = Ensemble(std::move(members), {{0.5, 1.5, -0.25}, 0.75});
  EXPECT_THAT(ensemble->relations(), ElementsAre("r1", "r2"));
  EXPECT_FALSE(ensemble->open_vocabulary());
  EXPECT_TRUE(ensemble->reads_relation_graph());
  EXPECT_EQ(ensemble->MemberRelation(2, 0), 2);   // r1 is the third member's id 2
  EXPECT_EQ(ensemble->MemberRelation(1, 0), -1);  // ULTRA's ids are the graph's

  ScopedTempDir dir;
  ASSERT_TRUE(ensemble->Save(dir.Sub("ensemble.pt")).ok());
  absl::StatusOr<AnyModel> loaded = LoadAnyModel(dir.Sub("ensemble.pt"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_NE(loaded->ensemble, nullptr);
  EXPECT_EQ(loaded->family(), ModelFamily::kEnsemble);
  const EnsembleModel& back = *loaded->ensemble;
  ASSERT_EQ(back.size(), 3u);
  EXPECT_THAT(back.rule().weights, ElementsAre(0.5, 1.5, -0.25));
  EXPECT_EQ(back.rule().bias, 0.75);
  EXPECT_THAT(back.relations(), ElementsAre("r1", "r2"));
  EXPECT_EQ(back.path_member(1)->format(), kUltraModelFormat);
  EXPECT_EQ(back.num_parameters(), ensemble->num_parameters());
  // Each member scores as it did.
  const StaticGraph graph = PathTestGraph();
  for (size_t m = 0; m < 3; ++m) {
    const RelationMap relations = back.MemberRelations(m, kGraphRelations);
    const std::vector<float> before =
        MemberScores(*ensemble->path_member(m), graph, relations, PathQuery(12, 1));
    const std::vector<float> after =
        MemberScores(*back.path_member(m), graph, relations, PathQuery(12, 1));
    for (size_t e = 0; e < before.size(); ++e)
      EXPECT_FLOAT_EQ(after[e], before[e]) << m << " " << e;
  }
}

TEST(EnsembleModelTest, CreateRefusesARuleOfTheWrongWidthAndMembersSharingNoRelation) {
  std::vector<std::unique_ptr<PathModel>> two;
  two.push_back(PathMember({"r0"}, 1));
  two.push_back(UltraMember(2));
  absl::StatusOr<std::unique_ptr<EnsembleModel>> wide =
      EnsembleModel::Create(std::move(two), {{1.0, 1.0, 1.0}, 0});
  ASSERT_FALSE(wide.ok());
  EXPECT_THAT(wide.status().message(), HasSubstr("3 weights for 2 members"));

  std::vector<std::unique_ptr<PathModel>> apart;
  apart.push_back(PathMember({"r0"}, 1));
  apart.push_back(PathMember({"r1"}, 2));
  absl::StatusOr<std::unique_ptr<EnsembleModel>> disjoint =
      EnsembleModel::Create(std::move(apart), {{1.0, 1.0}, 0});
  ASSERT_FALSE(disjoint.ok());
  EXPECT_THAT(disjoint.status().message(), HasSubstr("share no relation"));
}

TEST(EnsembleModelTest, AGraILMemberIsKeptInTheArchiveScoresAsItDidAndExplains) {
  std::vector<EnsembleMember> members(2);
  members[0].path = PathMember({"r0", "r1", "r2"}, 1);
  members[1].grail = GrailMember({"r2", "r1", "r3"}, 2);
  std::unique_ptr<EnsembleModel> ensemble = Ensemble(std::move(members), {{0.5, 1.5}, 0.75});
  EXPECT_THAT(ensemble->relations(), ElementsAre("r1", "r2"));
  EXPECT_EQ(ensemble->MemberRelation(1, 0), 1);  // r1 is GraIL's id 1
  EXPECT_FALSE(ensemble->reads_relation_graph());
  EXPECT_EQ(ensemble->explaining_member(), 1);
  EXPECT_EQ(ensemble->path_member(1), nullptr);
  ASSERT_NE(ensemble->grail_member(1), nullptr);

  const std::unique_ptr<EnsembleModel> loaded = SavedAndLoaded(*ensemble);
  ASSERT_NE(loaded, nullptr);
  const EnsembleModel& back = *loaded;
  ASSERT_EQ(back.size(), 2u);
  ASSERT_NE(back.path_member(0), nullptr);
  ASSERT_NE(back.grail_member(1), nullptr);
  EXPECT_EQ(back.explaining_member(), 1);
  EXPECT_THAT(back.rule().weights, ElementsAre(0.5, 1.5));
  EXPECT_EQ(back.num_parameters(), ensemble->num_parameters());
  EXPECT_EQ(back.grail_member(1)->config().hops, 1);
  const StaticGraph graph = PathTestGraph();
  const RelationMap relations = back.MemberRelations(1, kGraphRelations);
  const std::vector<float> before =
      GrailOwnScores(*ensemble->grail_member(1), graph, relations, 12, 1, false);
  const std::vector<float> after =
      GrailOwnScores(*back.grail_member(1), graph, relations, 12, 1, false);
  for (EntityId e = 0; e < graph.num_entities(); ++e) {
    if (e != 12) {
      EXPECT_FLOAT_EQ(after[e], before[e]) << e;
    }
  }
}

TEST(EnsembleModelTest, AKGEMemberIsKeptInTheArchiveWithItsUnknownScoreAndScoresAsItDid) {
  std::vector<EnsembleMember> members(2);
  members[0].path = PathMember({"r0", "r1", "r2"}, 1);
  members[1].kge = KgeMember({"r2", "r1", "r3"}, 30, 2);
  std::unique_ptr<EnsembleModel> ensemble =
      Ensemble(std::move(members), {{0.5, 1.5}, 0.75}, {0.0, -2.25});
  EXPECT_THAT(ensemble->relations(), ElementsAre("r1", "r2"));
  EXPECT_EQ(ensemble->MemberRelation(1, 1), 0);  // r2 is the KGE model's id 0
  EXPECT_EQ(ensemble->explaining_member(), -1);
  EXPECT_EQ(ensemble->fit_columns(), 3u);
  EXPECT_EQ(ensemble->KgeEntity(1, "e29"), 0u);
  EXPECT_EQ(ensemble->KgeEntity(1, "e30"), std::nullopt);

  const std::unique_ptr<EnsembleModel> loaded = SavedAndLoaded(*ensemble);
  ASSERT_NE(loaded, nullptr);
  const EnsembleModel& back = *loaded;
  ASSERT_NE(back.kge_member(1), nullptr);
  EXPECT_EQ(back.kge_member(1)->config().kind, KgeKind::kRotatE);
  EXPECT_THAT(back.rule().weights, ElementsAre(0.5, 1.5));
  EXPECT_THAT(back.unknown_scores(), ElementsAre(0.0, -2.25));
  EXPECT_EQ(back.num_parameters(), ensemble->num_parameters());
  for (const auto& [h, t] : std::vector<std::pair<EntityId, EntityId>>{{3, 7}, {29, 0}, {12, 5}}) {
    EXPECT_FLOAT_EQ(*KgeScore(back, 1, h, "r1", t), *KgeScore(*ensemble, 1, h, "r1", t));
  }
  EXPECT_EQ(KgeScore(back, 1, 3, "r1", 31), std::nullopt);
}

TEST(EnsembleModelTest, AFittedRulesUnknownColumnBecomesTheKGEMembersUnknownScore) {
  std::vector<EnsembleMember> members(3);
  members[0].kge = KgeMember(kGraphRelations, 10, 1);
  members[1].path = PathMember(kGraphRelations, 2);
  members[2].kge = KgeMember(kGraphRelations, 20, 3);
  std::unique_ptr<EnsembleModel> ensemble = Ensemble(std::move(members), {{1, 1, 1}, 0});
  ASSERT_EQ(ensemble->fit_columns(), 5u);
  ASSERT_TRUE(ensemble->SetFittedRule({{2.0, 0.5, -4.0, 3.0, 6.0}, 0.1}).ok());
  EXPECT_THAT(ensemble->rule().weights, ElementsAre(2.0, 0.5, -4.0));
  EXPECT_EQ(ensemble->rule().bias, 0.1);
  // w_m * unknown_m is the fitted column's weight.
  EXPECT_THAT(ensemble->unknown_scores(), ElementsAre(1.5, 0.0, -1.5));
  absl::Status narrow = ensemble->SetFittedRule({{2.0, 0.5, -4.0}, 0});
  EXPECT_THAT(narrow.message(), HasSubstr("3 weights for 5 columns"));
}

TEST(EnsembleModelTest, CreateRefusesAMissingMember) {
  std::vector<EnsembleMember> members(2);
  members[0].path = PathMember({"r0"}, 1);
  absl::StatusOr<std::unique_ptr<EnsembleModel>> missing =
      EnsembleModel::Create(std::move(members), {{1.0, 1.0}, 0});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("member is missing"));
}

// Queries where member 0's score ranks the answer near the top and member 1's is noise on a
// wider scale: the fit leans on member 0 and ranks better than equal weights.
// A member whose score is hidden for a third of the candidates (a KGE member's unknown ones),
// the answer's included: the offset column learns what a hidden candidate is worth, above the
// known candidates' typical score, so a hidden answer ranks among them rather than last.
TEST(EnsembleFitTest, AnOffsetColumnLearnsWhatAHiddenCandidateIsWorth) {
  SeededRandom random(9);
  std::vector<QueryCandidates> queries(300);
  for (QueryCandidates& q : queries) {
    for (int row = 0; row < 30; ++row) {
      const double signal = (row == 0 ? 2.0 : 0.0) + random.UniformDouble();
      const bool hidden = random.UniformDouble() < 1.0 / 3;
      q.scores.push_back(hidden ? 0.0f : static_cast<float>(signal));
      q.scores.push_back(hidden ? 1.0f : 0.0f);
      q.count.push_back(1);
    }
  }
  EnsembleFitOptions options;
  options.offsets = 1;
  absl::StatusOr<EnsembleFit> fit = FitEnsembleRule(queries, 2, options);
  ASSERT_TRUE(fit.ok()) << fit.status();
  const double w = fit->rule.weights[0], offset = fit->rule.weights[1];
  EXPECT_GT(w, 0);
  EXPECT_GT(offset / w, 0.5);  // above a known non-answer's mean score
  EXPECT_LT(offset / w, 2.5);  // below a known answer's
  EXPECT_GT(CandidateMrr(queries, fit->rule.weights), CandidateMrr(queries, {w, 0.0}));

  options.fit_weights = false;
  absl::StatusOr<EnsembleFit> unweighted = FitEnsembleRule(queries, 2, options);
  ASSERT_TRUE(unweighted.ok()) << unweighted.status();
  EXPECT_EQ(unweighted->rule.weights[1], 0);  // an offset starts, and then stays, at 0
  options.offsets = 2;
  EXPECT_THAT(FitEnsembleRule(queries, 2, options).status().message(), HasSubstr("leave no score"));
}

TEST(EnsembleFitTest, TheFitWeighsTheInformativeMemberAboveTheNoisyOne) {
  SeededRandom random(5);
  std::vector<QueryCandidates> queries(200);
  for (QueryCandidates& q : queries) {
    for (int row = 0; row < 30; ++row) {
      const double signal = (row == 0 ? 2.0 : 0.0) + random.UniformDouble();
      q.scores.push_back(static_cast<float>(signal));
      q.scores.push_back(static_cast<float>(6.0 * random.UniformDouble()));
      q.count.push_back(1);
    }
    // A group of 100 entities beyond both members' reach, sharing their far scores.
    q.scores.push_back(0.0f);
    q.scores.push_back(0.0f);
    q.count.push_back(100);
  }
  absl::StatusOr<EnsembleFit> fit = FitEnsembleRule(queries, 2, {});
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->rule.weights.size(), 2u);
  EXPECT_GT(fit->rule.weights[0], 0);
  EXPECT_GT(fit->rule.weights[0], 5 * std::abs(fit->rule.weights[1]));
  EXPECT_LT(fit->loss, fit->loss_equal_weights);
  EXPECT_GT(CandidateMrr(queries, fit->rule.weights), CandidateMrr(queries, {1.0, 1.0}));
  EXPECT_GT(CandidateMrr(queries, fit->rule.weights), 0.9);
  // Calibrated: an answer's combined score reads as a log-odds well above a typical
  // candidate's.
  EXPECT_GT(fit->rule.Logit({2.5, 3.0}), fit->rule.Logit({0.5, 3.0}));

  // The ablation: equal weights, only their common scale and the bias fitted.
  EnsembleFitOptions equal;
  equal.fit_weights = false;
  absl::StatusOr<EnsembleFit> unweighted = FitEnsembleRule(queries, 2, equal);
  ASSERT_TRUE(unweighted.ok()) << unweighted.status();
  EXPECT_GT(unweighted->rule.weights[0], 0);
  EXPECT_DOUBLE_EQ(unweighted->rule.weights[0], unweighted->rule.weights[1]);
  EXPECT_DOUBLE_EQ(unweighted->loss, unweighted->loss_equal_weights);

  std::vector<QueryCandidates> bad(1);
  bad[0].scores = {1.0f, 2.0f, 3.0f};
  bad[0].count = {1, 1};
  EXPECT_THAT(FitEnsembleRule(bad, 2, {}).status().message(), HasSubstr("3 scores for 2 rows"));
  EXPECT_FALSE(FitEnsembleRule({}, 2, {}).ok());
}

std::vector<Triple> TestFacts(const StaticGraph& graph) {
  std::vector<Triple> test;
  SeededRandom random(9);
  while (test.size() < 12) {
    const uint32_t h = 1 + static_cast<uint32_t>(random.Uniform(44));
    const uint32_t t = 1 + static_cast<uint32_t>(random.Uniform(44));
    const uint32_t r = static_cast<uint32_t>(random.Uniform(3));
    if (h != t && !graph.HasFact(h, r, t)) test.push_back({h, r, t});
  }
  return test;
}

TEST(EnsembleEvaluationTest, AnEnsembleOfOneMemberEvaluatesAsThatMember) {
  const StaticGraph graph = PathTestGraph();
  std::vector<std::unique_ptr<PathModel>> one;
  one.push_back(PathMember(kGraphRelations, 4));
  std::unique_ptr<EnsembleModel> ensemble = Ensemble(std::move(one), {{1.0}, 0});
  const std::vector<Triple> test = TestFacts(graph);
  PathEvaluationOptions options;
  absl::StatusOr<EvaluationResult> alone =
      EvaluatePath(*ensemble->path_member(0), graph, RelationMap(), test, options);
  absl::StatusOr<EvaluationResult> combined =
      EvaluateEnsemble(*ensemble, graph, EntityNames(graph), kGraphRelations, test, options);
  ASSERT_TRUE(alone.ok()) << alone.status();
  ASSERT_TRUE(combined.ok()) << combined.status();
  EXPECT_DOUBLE_EQ(combined->auc_pr, alone->auc_pr);
  EXPECT_DOUBLE_EQ(combined->mrr, alone->mrr);
  ASSERT_TRUE(combined->full.has_value());
  EXPECT_NEAR(combined->full->mrr, alone->full->mrr, 1e-12);
  EXPECT_NEAR(combined->full->hits_at_10, alone->full->hits_at_10, 1e-12);
}

// Every entity's combined score is the rule over the members' own scores (a member's far score
// for an entity beyond its reach), whatever relation ids each member has.
TEST(EnsembleEvaluationTest, EachEntitysScoreIsTheRuleOverItsMembersScores) {
  const StaticGraph graph = PathTestGraph();
  std::vector<std::unique_ptr<PathModel>> members;
  members.push_back(PathMember({"r2", "r0", "r1", "r3"}, 4));  // reach mask: far entities
  members.push_back(UltraMember(6));                           // the whole graph
  std::unique_ptr<EnsembleModel> ensemble = Ensemble(std::move(members), {{0.8, -1.7}, 0.3});
  const int32_t R = static_cast<int32_t>(graph.num_relations());
  const std::vector<RankingQuery> queries = {{12, 1}, {0, 0 + R}, {47, 2}, {21, 2 + R}};
  std::vector<std::vector<float>> combined(queries.size());
  std::vector<int64_t> own(queries.size());
  ASSERT_TRUE(RunEnsembleQueries(*ensemble, graph, EntityNames(graph), kGraphRelations, queries,
                                 PathScoringOptions(),
                                 [&](size_t i, const QueryScores& scores) {
                                   for (EntityId e = 0; e < graph.num_entities(); ++e) {
                                     combined[i].push_back(scores.Of(e));
                                   }
                                   own[i] = scores.NumOwn();
                                 })
                  .ok());
  for (size_t i = 0; i < queries.size(); ++i) {
    const bool inverse = queries[i].relation >= R;
    const int32_t r = queries[i].relation - (inverse ? R : 0);
    const RelationMap path_map = ensemble->MemberRelations(0, kGraphRelations);
    const int32_t path_r = path_map(static_cast<uint32_t>(r)) + (inverse ? 4 : 0);
    const std::vector<float> path = MemberScores(*ensemble->path_member(0), graph, path_map,
                                                 PathQuery(queries[i].source, path_r));
    const std::vector<float> ultra =
        MemberScores(*ensemble->path_member(1), graph, RelationMap(),
                     PathQuery(queries[i].source, queries[i].relation));
    for (EntityId e = 0; e < graph.num_entities(); ++e) {
      EXPECT_NEAR(combined[i][e], 0.3 + 0.8 * path[e] - 1.7 * ultra[e], 1e-5) << i << " " << e;
    }
    EXPECT_EQ(own[i], graph.num_entities());  // ULTRA scores every entity on its own
  }
}

// A GraIL member scores every entity within reach of the source on its own subgraph, and any
// other entity gets the score its trivial subgraph shares with the rest: so every entity's
// combined score is the rule over what GraIL gives that very fact, near or far.
TEST(EnsembleEvaluationTest, AGraILMembersScoreOfEachEntityIsItsOwnSubgraphsNearOrFar) {
  const StaticGraph graph = PathTestGraph();
  std::vector<EnsembleMember> members(2);
  members[0].grail = GrailMember({"r1", "r0", "r2", "r3"}, 3);
  members[1].path = PathMember(kGraphRelations, 4);
  const double wg = 1.3, wp = -0.6, b = 0.2;
  std::unique_ptr<EnsembleModel> ensemble = Ensemble(std::move(members), {{wg, wp}, b});
  const int32_t R = static_cast<int32_t>(graph.num_relations());
  const std::vector<RankingQuery> queries = {{12, 1}, {0, 0 + R}, {47, 2}, {21, 2 + R}, {3, 0}};
  const std::vector<std::vector<float>> combined = Combined(*ensemble, graph, queries);
  const RelationMap grail_map = ensemble->MemberRelations(0, kGraphRelations);
  for (size_t i = 0; i < queries.size(); ++i) {
    const bool inverse = queries[i].relation >= R;
    const uint32_t r = static_cast<uint32_t>(queries[i].relation - (inverse ? R : 0));
    const std::vector<float> grail =
        GrailOwnScores(*ensemble->grail_member(0), graph, grail_map, queries[i].source, r, inverse);
    const PathModel& path_model = *ensemble->path_member(1);
    const std::vector<float> path = MemberScores(
        path_model, graph, RelationMap(),
        PathQuery(queries[i].source,
                  static_cast<int32_t>(r) + (inverse ? path_model.NumRelations(graph) : 0)));
    for (EntityId e = 0; e < graph.num_entities(); ++e) {
      if (e == queries[i].source) continue;
      EXPECT_NEAR(combined[i][e], b + wg * grail[e] + wp * path[e], 1e-4) << i << " " << e;
    }
  }
  // Some entities are near for GraIL and some far (the isolated 45..49 from every source).
  const std::vector<EntityId> near = *EntitiesWithinHops(graph, 12, 2, 100);
  EXPECT_GT(near.size(), 2u);
  EXPECT_FALSE(std::binary_search(near.begin(), near.end(), EntityId{46}));
}

TEST(EnsembleEvaluationTest, ValidationQueriesPutTheAnswerFirstAndLeaveOtherKnownAnswersOut) {
  const StaticGraph graph = PathTestGraph();
  std::vector<std::unique_ptr<PathModel>> members;
  members.push_back(PathMember(kGraphRelations, 4));
  members.push_back(PathMember(kGraphRelations, 5));
  std::unique_ptr<EnsembleModel> ensemble = Ensemble(std::move(members), {{1.0, 1.0}, 0});
  // Two validation facts with the same query (12, r0, ?): each is a known answer of the other.
  std::vector<Triple> valid = {{12, 0, 30}, {12, 0, 31}};
  ASSERT_FALSE(graph.HasFact(12, 0, 30));
  ASSERT_FALSE(graph.HasFact(12, 0, 31));
  ValidationQueryOptions options;
  options.top_per_member = 1000;
  absl::StatusOr<std::vector<QueryCandidates>> queries = CollectValidationQueries(
      *ensemble, graph, EntityNames(graph), kGraphRelations, valid, {}, options);
  ASSERT_TRUE(queries.ok()) << queries.status();
  ASSERT_EQ(queries->size(), 4u);  // a tail and a head query each
  const RelationMap identity;
  for (size_t q = 0; q < 2; ++q) {
    const QueryCandidates& c = (*queries)[2 * q];  // the tail query (12, r0, ?)
    const std::vector<float> s0 =
        MemberScores(*ensemble->path_member(0), graph, identity, PathQuery(12, 0));
    const EntityId answer = valid[q].tail, other = valid[1 - q].tail;
    EXPECT_FLOAT_EQ(c.scores[0], s0[answer]);
    EXPECT_EQ(c.count[0], 1);
    // Every entity counted once, but for the source and the other known answer.
    double total = 0;
    for (double n : c.count) total += n;
    size_t known_in_graph = 0;
    for (const Neighbor& n : graph.OutEdges(12))
      known_in_graph += n.relation == 0 && n.entity != 12;
    EXPECT_EQ(total, graph.num_entities() - 1 - 1 - known_in_graph) << q;
    // The other answer's row is not among the candidates.
    for (size_t row = 1; row < c.rows(); ++row) {
      EXPECT_FALSE(c.count[row] == 1 && c.scores[2 * row] == s0[other] && s0[other] != s0[answer])
          << row;
    }
  }
}

// A KGE member scores the entities it knows, for a source and relation it knows, as the model
// scores that very fact (a head query's candidate as the fact's head), and every other entity
// with its unknown score.
TEST(EnsembleEvaluationTest, AKGEMembersScoreIsTheModelsWhereItKnowsTheFactAndItsUnknownScore) {
  const StaticGraph graph = PathTestGraph();
  std::vector<EnsembleMember> members(2);
  members[0].path = PathMember(kGraphRelations, 4);
  members[1].kge = KgeMember({"r1", "r0", "r2", "r3"}, 40, 5);  // e40..e49 unknown to it
  const double wp = 0.8, wk = -1.2, b = 0.3, unknown = 0.65;
  std::unique_ptr<EnsembleModel> ensemble =
      Ensemble(std::move(members), {{wp, wk}, b}, {0.0, unknown});
  const int32_t R = static_cast<int32_t>(graph.num_relations());
  // 42 is a source the KGE model does not know.
  const std::vector<RankingQuery> queries = {{12, 1}, {0, 0 + R}, {42, 2}, {21, 2 + R}};
  const std::vector<std::vector<float>> combined = Combined(*ensemble, graph, queries);
  size_t known = 0, unknown_count = 0;
  for (size_t i = 0; i < queries.size(); ++i) {
    const bool inverse = queries[i].relation >= R;
    const int32_t r = queries[i].relation - (inverse ? R : 0);
    const PathModel& path_model = *ensemble->path_member(0);
    const std::vector<float> path = MemberScores(
        path_model, graph, RelationMap(),
        PathQuery(queries[i].source, r + (inverse ? path_model.NumRelations(graph) : 0)));
    for (EntityId e = 0; e < graph.num_entities(); ++e) {
      if (e == queries[i].source) continue;
      const std::optional<float> kge =
          inverse ? KgeScore(*ensemble, 1, e, kGraphRelations[r], queries[i].source)
                  : KgeScore(*ensemble, 1, queries[i].source, kGraphRelations[r], e);
      (kge ? known : unknown_count) += 1;
      EXPECT_NEAR(combined[i][e], b + wp * path[e] + wk * kge.value_or(unknown), 1e-4)
          << i << " " << e;
    }
  }
  EXPECT_GT(known, 100u);
  EXPECT_GT(unknown_count, 49u);  // query 2's every candidate, and e40..e49 of the others
}

// The fit's rows have a KGE member's score where it knows the candidate and 0 with its
// "unknown" column 1 where it does not, or where the fit hides it (kge_hidden).
TEST(EnsembleEvaluationTest, ValidationRowsShowAKGEMembersScoreOrThatItIsUnknownOrHidden) {
  const StaticGraph graph = PathTestGraph();
  std::vector<EnsembleMember> members(2);
  members[0].kge = KgeMember(kGraphRelations, 40, 6);
  members[1].path = PathMember(kGraphRelations, 7);
  std::unique_ptr<EnsembleModel> ensemble = Ensemble(std::move(members), {{1.0, 1.0}, 0});
  const std::vector<Triple> valid = {{12, 0, 30}, {5, 1, 44}, {2, 2, 31}};
  for (const double hide : {0.0, 0.5, 1.0}) {
    ValidationQueryOptions options;
    options.top_per_member = 1000;
    options.kge_hidden = hide;
    absl::StatusOr<std::vector<QueryCandidates>> queries = CollectValidationQueries(
        *ensemble, graph, EntityNames(graph), kGraphRelations, valid, {}, options);
    ASSERT_TRUE(queries.ok()) << queries.status();
    ASSERT_EQ(queries->size(), 6u);
    size_t shown = 0, hidden = 0, unknown = 0;
    for (size_t q = 0; q < queries->size(); ++q) {
      const QueryCandidates& c = (*queries)[q];
      ASSERT_EQ(c.scores.size(), c.rows() * 3);
      const Triple& f = valid[q / 2];
      // The answer's row (of the tail query and the head query alike: the fact f): its KGE
      // score, unless hidden; unknown for e44.
      const std::optional<float> answer =
          KgeScore(*ensemble, 0, f.head, kGraphRelations[f.relation], f.tail);
      for (size_t row = 0; row < c.rows(); ++row) {
        const float score = c.scores[3 * row], flag = c.scores[3 * row + 2];
        ASSERT_TRUE(flag == 0 || flag == 1);
        if (flag == 1) EXPECT_EQ(score, 0);
        if (row == 0 && answer && flag == 0) EXPECT_FLOAT_EQ(score, *answer);
        if (row == 0 && !answer) EXPECT_EQ(flag, 1);
        if (c.count[row] > 1) EXPECT_EQ(flag, 1);  // the group beyond every neighbourhood
        if (flag == 0) ++shown;
        if (flag == 1 && row == 0 && answer) ++hidden;
        if (flag == 1) ++unknown;
      }
    }
    if (hide == 0) {
      EXPECT_EQ(hidden, 0u);
      EXPECT_GT(shown, 50u);
    }
    if (hide == 1) EXPECT_EQ(shown, 0u);
    if (hide == 0.5) {
      EXPECT_GT(shown, 50u);
      EXPECT_GT(unknown, 50u);
    }
  }
  // The fit over those columns gives the member an unknown score.
  ValidationQueryOptions options;
  options.kge_hidden = 0.5;
  absl::StatusOr<std::vector<QueryCandidates>> queries = CollectValidationQueries(
      *ensemble, graph, EntityNames(graph), kGraphRelations, valid, {}, options);
  ASSERT_TRUE(queries.ok());
  EnsembleFitOptions fit_options;
  fit_options.offsets = 1;
  absl::StatusOr<EnsembleFit> fit = FitEnsembleRule(*queries, 3, fit_options);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_TRUE(ensemble->SetFittedRule(fit->rule).ok());
  EXPECT_NE(ensemble->unknown_score(0), 0);
}

}  // namespace
}  // namespace grail
