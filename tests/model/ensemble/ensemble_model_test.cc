// Ensembles (model/ensemble/) of path-family and GraIL models: the archive, the rule's fit, and
// the evaluation that combines the members' scores (eval/ensemble_evaluation.h).
#include "model/ensemble/ensemble_model.h"

#include <algorithm>
#include <cmath>
#include <memory>
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
#include "tests/testing/grail_own_scores.h"
#include "tests/testing/path_test_graph.h"
#include "tests/testing/small_ultra.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::vector<std::string> kGraphRelations = {"r0", "r1", "r2", "r3"};

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

std::unique_ptr<EnsembleModel> Ensemble(std::vector<EnsembleMember> members, LinearFusion rule) {
  absl::StatusOr<std::unique_ptr<EnsembleModel>> e =
      EnsembleModel::Create(std::move(members), std::move(rule));
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

  ScopedTempDir dir;
  ASSERT_TRUE(ensemble->Save(dir.Sub("ensemble.pt")).ok());
  absl::StatusOr<AnyModel> loaded = LoadAnyModel(dir.Sub("ensemble.pt"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_NE(loaded->ensemble, nullptr);
  const EnsembleModel& back = *loaded->ensemble;
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
      EvaluateEnsemble(*ensemble, graph, kGraphRelations, test, options);
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
  ASSERT_TRUE(RunEnsembleQueries(*ensemble, graph, kGraphRelations, queries, PathScoringOptions(),
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
  std::vector<std::vector<float>> combined(queries.size());
  PathScoringOptions options;
  options.threads = 2;
  ASSERT_TRUE(RunEnsembleQueries(*ensemble, graph, kGraphRelations, queries, options,
                                 [&](size_t i, const QueryScores& scores) {
                                   for (EntityId e = 0; e < graph.num_entities(); ++e) {
                                     combined[i].push_back(scores.Of(e));
                                   }
                                 })
                  .ok());
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
  absl::StatusOr<std::vector<QueryCandidates>> queries =
      CollectValidationQueries(*ensemble, graph, kGraphRelations, valid, {}, options);
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

}  // namespace
}  // namespace grail
