// The path-based scorer: its neighbourhood batches, the exactness of scoring a query on its
// source's neighbourhood only, archives, training (a planted rule on an unseen graph,
// checkpoints and resume) and the evaluation's full ranking.
#include "model/path/path_model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "eval/path_evaluation.h"
#include "eval/ranking_metrics.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "model/families.h"
#include "model/grail/grail_model.h"
#include "model/path/path_batch.h"
#include "model/ultra/ultra_model.h"
#include "tests/testing/rule_graph.h"
#include "tests/testing/small_ultra.h"
#include "tests/testing/temp_dir.h"
#include "train/path_trainer.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

// 0 -a-> 1 -b-> 2 -a-> 3 -b-> 4, and 5 -a-> 0 (so 5 is one hop from 0 backwards).
StaticGraph Chain() {
  return StaticGraph(6, std::vector<Triple>{{0, 0, 1}, {1, 1, 2}, {2, 0, 3}, {3, 1, 4}, {5, 0, 0}});
}

std::vector<int64_t> EntitiesOfQuery(const PathBatch& batch, int64_t q) {
  return std::vector<int64_t>(batch.node_entity.begin() + batch.node_begin[q],
                              batch.node_entity.begin() + batch.node_begin[q + 1]);
}

TEST(PathBatchTest, AQueryHoldsTheEntitiesWithinTheRadiusWithTheirDistances) {
  const StaticGraph graph = Chain();
  PathBatchBuilder builder(graph, {}, /*num_relations=*/2, /*radius=*/2);
  PathBatch batch;
  ASSERT_TRUE(builder.Add({1, 0, {}, std::nullopt}, &batch).ok());
  ASSERT_TRUE(builder.Add({4, 3, {}, std::nullopt}, &batch).ok());
  ASSERT_EQ(batch.num_queries(), 2);
  EXPECT_THAT(EntitiesOfQuery(batch, 0), UnorderedElementsAre(1, 0, 2, 5, 3));
  EXPECT_THAT(EntitiesOfQuery(batch, 1), UnorderedElementsAre(4, 3, 2));
  EXPECT_EQ(batch.node_dist[batch.NodeOf(0, 1)], 0);
  EXPECT_EQ(batch.node_dist[batch.NodeOf(0, 5)], 2);
  EXPECT_EQ(batch.node_dist[batch.NodeOf(1, 2)], 2);
  EXPECT_EQ(batch.NodeOf(1, 0), -1);
  EXPECT_EQ(batch.source_index[1], batch.NodeOf(1, 4));
  EXPECT_THAT(batch.query_relation, ElementsAre(0, 3));
  // Query 0's facts among its nodes: 0-a-1, 1-b-2, 2-a-3, 5-a-0; each both ways, the inverse
  // with relation r + 2.
  std::vector<std::tuple<int64_t, int64_t, int64_t>> edges;
  for (int64_t e = 0; e < batch.num_edges(); ++e) {
    if (batch.node_query[batch.edge_src[e]] != 0) continue;
    edges.emplace_back(batch.node_entity[batch.edge_src[e]], batch.edge_relation[e],
                       batch.node_entity[batch.edge_dst[e]]);
  }
  EXPECT_THAT(edges, UnorderedElementsAre(std::make_tuple(0, 0, 1), std::make_tuple(1, 2, 0),
                                          std::make_tuple(1, 1, 2), std::make_tuple(2, 3, 1),
                                          std::make_tuple(2, 0, 3), std::make_tuple(3, 2, 2),
                                          std::make_tuple(5, 0, 0), std::make_tuple(0, 2, 5)));
}

TEST(PathBatchTest, AQueryWithTargetsHoldsThePathsOfAtMostLFactsToThem) {
  const StaticGraph graph = Chain();
  const RelationMap identity;
  PathBatchBuilder builder;
  // Source 1, target 3, L = 2: only 1 -> 2 -> 3 is short enough; 0, 4 and 5 lie off it.
  PathNeighbourhoodSpec spec;
  spec.graph = &graph;
  spec.relations = &identity;
  spec.num_relations = 2;
  spec.radius = 2;
  spec.path_length = 2;
  PathBatch batch;
  ASSERT_TRUE(builder.Add(spec, {1, 0, {}, std::nullopt, {3}}, &batch).ok());
  EXPECT_THAT(EntitiesOfQuery(batch, 0), ElementsAre(1, 2, 3));
  EXPECT_EQ(batch.node_dist[batch.NodeOf(0, 3)], 2);
  EXPECT_EQ(batch.num_edges(), 4);  // 1-b-2 and 2-a-3, both ways
  // With PNA the kept entities' other neighbours (0 and 4) join at distance kUnreached with
  // their edges into the path; 5, a neighbour of 0 only, does not.
  spec.every_in_edge = true;
  batch.Clear();
  ASSERT_TRUE(builder.Add(spec, {1, 0, {}, std::nullopt, {3}}, &batch).ok());
  EXPECT_THAT(EntitiesOfQuery(batch, 0), ElementsAre(1, 2, 3, 0, 4));
  EXPECT_EQ(batch.node_dist[batch.NodeOf(0, 0)], kUnreached);
  EXPECT_EQ(batch.node_dist[batch.NodeOf(0, 4)], kUnreached);
  EXPECT_EQ(batch.num_edges(), 8);
  // A target farther than L: the source alone, and the target reads the far score.
  spec.every_in_edge = false;
  batch.Clear();
  ASSERT_TRUE(builder.Add(spec, {1, 0, {}, std::nullopt, {4}}, &batch).ok());
  EXPECT_THAT(EntitiesOfQuery(batch, 0), ElementsAre(1));
  EXPECT_EQ(batch.NodeOf(0, 4), -1);
  // The targets' search stops at the node limit and the query falls back to the ball.
  spec.max_nodes = 3;
  spec.radius = 1;
  batch.Clear();
  ASSERT_TRUE(builder.Add(spec, {1, 0, {}, std::nullopt, {3, 4}}, &batch).ok());
  EXPECT_THAT(EntitiesOfQuery(batch, 0), UnorderedElementsAre(1, 0, 2));
}

TEST(PathBatchTest, AppendingShiftsIndicesAndAnIdenticalQueryIsShared) {
  const StaticGraph graph = Chain();
  PathBatchBuilder builder(graph, {}, 2, 2);
  PathBatch together, a, b, c;
  ASSERT_TRUE(builder.Add({1, 0, {}, std::nullopt}, &together).ok());
  ASSERT_TRUE(builder.Add({3, 1, {}, std::nullopt}, &together).ok());
  ASSERT_TRUE(builder.Add({1, 0, {}, std::nullopt}, &a).ok());
  ASSERT_TRUE(builder.Add({3, 1, {}, std::nullopt}, &b).ok());
  PathBatch appended;
  EXPECT_EQ(appended.AppendOrShare(a), 0);
  EXPECT_EQ(appended.AppendOrShare(b), 1);
  EXPECT_EQ(appended.node_entity, together.node_entity);
  EXPECT_EQ(appended.edge_src, together.edge_src);
  EXPECT_EQ(appended.edge_dst, together.edge_dst);
  EXPECT_EQ(appended.source_index, together.source_index);
  EXPECT_EQ(appended.node_begin, together.node_begin);
  EXPECT_EQ(appended.edge_begin, together.edge_begin);
  EXPECT_EQ(appended.NodeOf(1, 4), together.NodeOf(1, 4));
  // The same query again is answered by the first; the same source and relation over another
  // neighbourhood (a fact hidden) is not.
  EXPECT_EQ(appended.AppendOrShare(a), 0);
  EXPECT_EQ(appended.num_queries(), 2);
  ASSERT_TRUE(builder.Add({1, 0, {}, Triple{0, 0, 1}}, &c).ok());
  EXPECT_EQ(appended.AppendOrShare(c), 2);
  // Same source, relation and sizes, one fact's relation differs (a later graph version).
  const StaticGraph other(
      6, std::vector<Triple>{{0, 1, 1}, {1, 1, 2}, {2, 0, 3}, {3, 1, 4}, {5, 0, 0}});
  PathBatchBuilder other_builder(other, {}, 2, 2);
  PathBatch d;
  ASSERT_TRUE(other_builder.Add({1, 0, {}, std::nullopt}, &d).ok());
  ASSERT_EQ(d.num_nodes(), a.num_nodes());
  ASSERT_EQ(d.num_edges(), a.num_edges());
  EXPECT_EQ(appended.AppendOrShare(d), 3);
}

TEST(PathBatchTest, UnlinkedEntitiesAndTheHiddenFactAreNoMessageEdges) {
  const StaticGraph graph = Chain();
  PathBatchBuilder builder(graph, {}, 2, 3);
  PathBatch batch;
  // Hiding 1 -b-> 2 from 1's query cuts the chain: 2, 3, 4 are unreachable from 1.
  ASSERT_TRUE(builder.Add({1, 0, {}, Triple{1, 1, 2}}, &batch).ok());
  EXPECT_THAT(EntitiesOfQuery(batch, 0), UnorderedElementsAre(1, 0, 5));
  // Unlinking 0 from 1 (any relation, either direction) leaves 1 with 2's side only.
  ASSERT_TRUE(builder.Add({1, 0, {0}, std::nullopt}, &batch).ok());
  EXPECT_THAT(EntitiesOfQuery(batch, 1), UnorderedElementsAre(1, 2, 3, 4));
  // Only facts touching the source are hidden: from 2, the edge 0 -a-> 1 stays.
  ASSERT_TRUE(builder.Add({2, 0, {0}, std::nullopt}, &batch).ok());
  EXPECT_THAT(EntitiesOfQuery(batch, 2), UnorderedElementsAre(2, 1, 3, 0, 4, 5));
}

TEST(PathBatchTest, RelationsUnknownToTheModelAreLeftOutAndLimitsAreErrors) {
  const StaticGraph graph = Chain();
  PathBatch batch;
  // Graph relation 1 (b) maps to no model relation: 1's neighbourhood stops at 0 and 5.
  PathBatchBuilder unknown_b(graph, RelationMap{0, -1}, 1, 4);
  ASSERT_TRUE(unknown_b.Add({1, 0, {}, std::nullopt}, &batch).ok());
  EXPECT_THAT(EntitiesOfQuery(batch, 0), UnorderedElementsAre(1, 0, 5));

  PathBatchBuilder limited(graph, {}, 2, 4, /*max_nodes=*/3);
  absl::Status too_big = limited.Add({1, 0, {}, std::nullopt}, &batch);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(too_big.message(), HasSubstr("limit of 3"));
  EXPECT_EQ(limited.Add({9, 0, {}, std::nullopt}, &batch).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(limited.Add({1, 4, {}, std::nullopt}, &batch).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batch.num_queries(), 1);  // the failed queries left nothing behind
}

// A random graph with a few components' worth of long paths, so that neighbourhoods of
// radius L leave entities out.
StaticGraph RandomGraph(uint32_t entities, int facts, uint32_t relations, uint64_t seed) {
  SeededRandom random(seed);
  std::vector<Triple> triples;
  for (int i = 0; i < facts; ++i) {
    const uint32_t h = static_cast<uint32_t>(random.Uniform(entities));
    // Mostly local edges: a long, thin graph with entities far from each other.
    const uint32_t t = static_cast<uint32_t>((h + 1 + random.Uniform(3)) % entities);
    triples.push_back({h, static_cast<uint32_t>(random.Uniform(relations)), t});
  }
  return StaticGraph(entities, triples);
}

std::vector<std::string> Relations(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(absl::StrCat("r", i));
  return names;
}

// Every entity's score for each query, from a batch built with `radius`.
std::vector<std::vector<float>> AllScores(const PathModel& model, const GraphView& graph,
                                          const std::vector<PathQuery>& queries, int radius) {
  PathBatchBuilder builder(graph, {}, model.num_relations(), radius);
  PathBatch batch;
  const RelationMap identity;
  PathNeighbourhoodSpec spec = model.Neighbourhood(&graph, &identity, 0);  // ULTRA's
  spec.layout = PathLayout::kDisjoint;
  for (const PathQuery& q : queries) {
    EXPECT_TRUE(
        (model.open_vocabulary() ? builder.Add(spec, q, &batch) : builder.Add(q, &batch)).ok());
  }
  absl::StatusOr<PathScores> scores = model.Score(batch);
  EXPECT_TRUE(scores.ok()) << scores.status();
  std::vector<std::vector<float>> all(queries.size());
  if (!scores.ok()) return all;
  for (size_t q = 0; q < queries.size(); ++q) {
    for (uint32_t e = 0; e < graph.num_entities(); ++e) {
      all[q].push_back(scores->Of(batch, static_cast<int64_t>(q), e));
    }
  }
  return all;
}

// A 3-layer model, sum or PNA aggregation, with or without the reach mask, with or without
// the reach feature, on a long, thin random graph.
class PathExactnessTest : public ::testing::TestWithParam<std::tuple<bool, bool, bool>> {
 protected:
  void SetUp() override {
    config_.num_layers = 3;
    config_.dim = 8;
    config_.pna = std::get<0>(GetParam());
    config_.reach_mask = std::get<1>(GetParam());
    config_.reach_feature = std::get<2>(GetParam());
    config_.pna_delta = 1.3;
    absl::StatusOr<std::unique_ptr<PathModel>> model = PathModel::Create(config_, Relations(3), 7);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  PathConfig config_;
  std::unique_ptr<PathModel> model_;
  const StaticGraph graph_ = RandomGraph(60, 90, 3, 11);
};

// The model's radius gives the scores the whole graph gives, for every entity: the
// neighbourhood restriction is exact, not an approximation. With PNA this needs one hop
// more than the layers (degrees of the outermost nodes).
TEST_P(PathExactnessTest, ScoringOnTheSourcesNeighbourhoodEqualsScoringOnTheWholeGraph) {
  const PathConfig& config = config_;
  const PathModel& model = *model_;
  const StaticGraph& graph = graph_;
  if (!config.reach_mask) GTEST_SKIP() << "without the reach mask a ranking is the whole graph";
  const std::vector<PathQuery> queries = {
      {0, 1, {}, std::nullopt}, {17, 4, {}, std::nullopt}, {42, 2, {}, std::nullopt}};
  const auto local = AllScores(model, graph, queries, config.radius());
  const auto whole = AllScores(model, graph, queries, /*radius=*/1000);
  int beyond = 0;
  for (size_t q = 0; q < queries.size(); ++q) {
    for (uint32_t e = 0; e < graph.num_entities(); ++e) {
      EXPECT_NEAR(local[q][e], whole[q][e], 1e-5 * (1 + std::fabs(whole[q][e])))
          << "query " << q << " entity " << e;
    }
    PathBatchBuilder builder(graph, {}, 3, config.radius());
    PathBatch batch;
    ASSERT_TRUE(builder.Add(queries[q], &batch).ok());
    beyond += static_cast<int>(graph.num_entities()) - static_cast<int>(batch.num_nodes());
  }
  EXPECT_GT(beyond, 30);  // the graph is long enough for the radius to leave entities out
}

// A query with targets (ScoreTriplet's) runs on the entities on a path of at most L facts from
// the source to a target (without the reach mask: within L facts of a target), and still
// scores each target exactly as the whole graph does: near, far, several at once, and the
// source itself.
TEST_P(PathExactnessTest, AQueryWithTargetsScoresThemAsTheWholeGraphOnFewerEntities) {
  const PathModel& model = *model_;
  const StaticGraph& graph = graph_;
  const RelationMap identity;
  const PathNeighbourhoodSpec spec = model.Neighbourhood(&graph, &identity, 0);
  PathBatchBuilder builder;
  int queries = 0, smaller = 0;
  for (EntityId source : {0u, 17u, 42u}) {
    for (int32_t relation : {1, 4}) {
      const int whole_graph = config_.reach_mask ? 1000 : -1;
      const auto whole =
          AllScores(model, graph, {{source, relation, {}, std::nullopt}}, whole_graph)[0];
      PathBatch ball;
      ASSERT_TRUE(builder.Add(spec, {source, relation, {}, std::nullopt}, &ball).ok());
      const std::vector<std::vector<EntityId>> target_sets = {
          {(source + 2) % 60},
          {(source + 4) % 60, (source + 7) % 60},
          {(source + 30) % 60},
          {source}};
      for (const std::vector<EntityId>& targets : target_sets) {
        PathBatch batch;
        ASSERT_TRUE(builder.Add(spec, {source, relation, {}, std::nullopt, targets}, &batch).ok());
        absl::StatusOr<PathScores> scores = model.Score(batch);
        ASSERT_TRUE(scores.ok()) << scores.status();
        for (EntityId t : targets) {
          EXPECT_NEAR(scores->Of(batch, 0, t), whole[t], 1e-5 * (1 + std::fabs(whole[t])))
              << "source " << source << " relation " << relation << " target " << t;
        }
        ++queries;
        smaller += batch.num_nodes() < ball.num_nodes() ? 1 : 0;
      }
    }
  }
  EXPECT_EQ(smaller, queries);
}

// Whether a query with targets gets its whole neighbourhood (the ranking's: its pass then
// answers every target, and is kept as the query's) is what the targets' search alone says,
// and a whole one is the very neighbourhood the query has without targets. Targets from one
// entity to most of the graph, with and without a node bound.
TEST_P(PathExactnessTest, TheTargetsSearchTellsWhetherTheNeighbourhoodIsTheWholeQuerys) {
  const PathModel& model = *model_;
  const StaticGraph& graph = graph_;
  const RelationMap identity;
  SeededRandom rng(23);
  PathBatchBuilder builder;
  int whole = 0, targeted = 0;
  for (int64_t max_nodes : {0, 20}) {
    const PathNeighbourhoodSpec spec = model.Neighbourhood(&graph, &identity, max_nodes);
    for (int trial = 0; trial < 40; ++trial) {
      const EntityId source = static_cast<EntityId>(rng.Uniform(60));
      const int32_t relation = static_cast<int32_t>(rng.Uniform(3));
      std::vector<EntityId> targets;
      const uint64_t count = 1 + rng.Uniform(trial % 2 == 0 ? 3 : 45);
      for (uint64_t i = 0; i < count; ++i)
        targets.push_back(static_cast<EntityId>(rng.Uniform(60)));
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      const PathQuery query{source, relation, {}, std::nullopt, targets};
      const bool predicted = builder.TargetsKeepWholeQuery(spec, query);
      PathBatch with, without;
      const absl::Status added = builder.Add(spec, query, &with);
      if (!added.ok()) continue;  // past the node bound, whole or not: refused
      EXPECT_EQ(builder.last_query_whole(), predicted) << "trial " << trial;
      if (!predicted) {
        ++targeted;
        continue;
      }
      ++whole;
      ASSERT_TRUE(builder.Add(spec, {source, relation, {}, std::nullopt}, &without).ok());
      EXPECT_EQ(with.node_entity, without.node_entity);
      EXPECT_EQ(with.edge_src, without.edge_src);
      EXPECT_EQ(with.edge_relation, without.edge_relation);
    }
  }
  EXPECT_GT(whole, 0);
  EXPECT_GT(targeted, 0);
}

INSTANTIATE_TEST_SUITE_P(SumAndPna, PathExactnessTest,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return std::string(std::get<0>(info.param) ? "Pna" : "Sum") +
                                  (std::get<1>(info.param) ? "" : "Unmasked") +
                                  (std::get<2>(info.param) ? "ReachFeature" : "");
                         });

// Without the reach mask (NBFNet's own computation) a query covers every entity, and those
// no path reaches are scored apart by their own surroundings rather than sharing one score.
TEST(PathModelTest, WithoutTheReachMaskEveryEntityIsInTheQueryAndScoredOnItsOwn) {
  PathConfig config;
  config.num_layers = 2;
  config.dim = 8;
  config.reach_mask = false;
  ASSERT_EQ(config.radius(), -1);
  absl::StatusOr<std::unique_ptr<PathModel>> model = PathModel::Create(config, Relations(3), 5);
  ASSERT_TRUE(model.ok());
  // Two components: the query's source 0 is in the first; 40..59 none of its paths reach.
  std::vector<Triple> facts;
  SeededRandom random(2);
  for (uint32_t e = 0; e < 59; ++e) {
    if (e == 39) continue;
    facts.push_back({e, static_cast<uint32_t>(random.Uniform(3)), e + 1});
    if (e % 3 == 0 && e + 2 < 60 && (e + 2 <= 39) == (e <= 39)) {
      facts.push_back({e, static_cast<uint32_t>(random.Uniform(3)), e + 2});
    }
  }
  const StaticGraph graph(60, facts);
  PathBatchBuilder builder(graph, {}, 3, config.radius());
  PathBatch batch;
  ASSERT_TRUE(builder.Add({0, 1, {}, std::nullopt}, &batch).ok());
  EXPECT_EQ(batch.num_nodes(), 60);
  EXPECT_EQ(batch.node_dist[batch.NodeOf(0, 45)], kUnreached);
  EXPECT_EQ(batch.node_dist[batch.NodeOf(0, 1)], 1);
  const auto scores = AllScores(**model, graph, {{0, 1, {}, std::nullopt}}, config.radius())[0];
  std::set<float> unreached(scores.begin() + 40, scores.end());
  EXPECT_GT(unreached.size(), 2u);
  // The archive keeps the choice.
  ScopedTempDir dir;
  ASSERT_TRUE((*model)->Save(dir.Sub("m.pt")).ok());
  EXPECT_FALSE((*PathModel::Load(dir.Sub("m.pt")))->config().reach_mask);
}

// The reach feature is the scoring MLP's one input that says whether a path of at most L facts
// from the source reaches an entity: marking one unreached entity as reached changes its score
// and nobody else's. Without the feature (and the mask) the distance is read nowhere.
TEST(PathModelTest, TheReachFeatureScoresAnEntityByWhetherTheSourceReachesIt) {
  const StaticGraph graph = RandomGraph(60, 70, 3, 11);
  for (bool feature : {true, false}) {
    PathConfig config;
    config.num_layers = 2;
    config.dim = 8;
    config.reach_mask = false;
    config.reach_feature = feature;
    absl::StatusOr<std::unique_ptr<PathModel>> model = PathModel::Create(config, Relations(3), 5);
    ASSERT_TRUE(model.ok()) << model.status();
    PathBatchBuilder builder(graph, {}, 3, config.radius());
    PathBatch batch;
    ASSERT_TRUE(builder.Add({0, 1, {}, std::nullopt}, &batch).ok());
    int64_t far_node = -1;
    for (int64_t i = 0; i < batch.num_nodes() && far_node < 0; ++i) {
      if (batch.node_dist[i] > config.num_layers) far_node = i;
    }
    ASSERT_GE(far_node, 0) << "the graph must leave an entity beyond 2 hops of the source";
    PathBatch marked = batch;
    marked.node_dist[far_node] = 1;
    const PathScores before = *(*model)->Score(batch);
    const PathScores after = *(*model)->Score(marked);
    for (int64_t i = 0; i < batch.num_nodes(); ++i) {
      if (i == far_node && feature) {
        EXPECT_GT(std::fabs(after.node[i] - before.node[i]), 1e-4) << "node " << i;
      } else {
        EXPECT_FLOAT_EQ(after.node[i], before.node[i]) << "node " << i << " feature " << feature;
      }
    }
    // The archive keeps the choice.
    ScopedTempDir dir;
    ASSERT_TRUE((*model)->Save(dir.Sub("m.pt")).ok());
    absl::StatusOr<std::unique_ptr<PathModel>> loaded = PathModel::Load(dir.Sub("m.pt"));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ((*loaded)->config().reach_feature, feature);
    EXPECT_FLOAT_EQ((*(*loaded)->Score(marked)).node[far_node], after.node[far_node]);
  }
}

TEST(PathModelTest, QueriesBatchedTogetherScoreAsEachAlone) {
  PathConfig config;
  config.num_layers = 2;
  config.dim = 8;
  absl::StatusOr<std::unique_ptr<PathModel>> model = PathModel::Create(config, Relations(3), 3);
  ASSERT_TRUE(model.ok());
  const StaticGraph graph = RandomGraph(40, 80, 3, 5);
  const std::vector<PathQuery> queries = {
      {3, 0, {}, std::nullopt}, {3, 5, {}, std::nullopt}, {30, 1, {}, std::nullopt}};
  const auto together = AllScores(**model, graph, queries, config.radius());
  for (size_t q = 0; q < queries.size(); ++q) {
    const auto alone = AllScores(**model, graph, {queries[q]}, config.radius());
    for (uint32_t e = 0; e < graph.num_entities(); ++e) {
      EXPECT_NEAR(together[q][e], alone[0][e], 1e-5) << "query " << q << " entity " << e;
    }
  }
  // Distinct queries of one source differ: the query relation is the boundary condition.
  EXPECT_NE(together[0], together[1]);
}

TEST(PathModelTest, ArchivesRoundTripAndNameTheirFamily) {
  ScopedTempDir dir;
  PathConfig config;
  config.num_layers = 2;
  config.dim = 8;
  config.pna = true;
  config.dependent = false;
  config.pna_delta = 0.9;
  absl::StatusOr<std::unique_ptr<PathModel>> model = PathModel::Create(config, Relations(2), 1);
  ASSERT_TRUE(model.ok());
  (*model)->set_training_fingerprint("fp");
  const std::string path = dir.Sub("path.pt");
  ASSERT_TRUE((*model)->Save(path).ok());
  absl::StatusOr<std::unique_ptr<PathModel>> loaded = PathModel::Load(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->relations(), Relations(2));
  EXPECT_EQ((*loaded)->training_fingerprint(), "fp");
  EXPECT_TRUE((*loaded)->config().pna);
  EXPECT_FALSE((*loaded)->config().dependent);
  EXPECT_DOUBLE_EQ((*loaded)->config().pna_delta, 0.9);
  const StaticGraph graph = RandomGraph(20, 40, 2, 2);
  EXPECT_EQ(AllScores(**model, graph, {{1, 2, {}, std::nullopt}}, 3),
            AllScores(**loaded, graph, {{1, 2, {}, std::nullopt}}, 3));

  absl::StatusOr<std::unique_ptr<GrailModel>> grail = GrailModel::Create({}, Relations(2), 1);
  ASSERT_TRUE(grail.ok());
  ASSERT_TRUE((*grail)->Save(dir.Sub("grail.pt")).ok());
  EXPECT_EQ(LoadAnyModel(path)->family(), ModelFamily::kPath);
  EXPECT_EQ(LoadAnyModel(dir.Sub("grail.pt"))->family(), ModelFamily::kGrail);
  // Each family's loader refuses the other's archive, naming the format it expected.
  absl::StatusOr<std::unique_ptr<GrailModel>> wrong = GrailModel::Load(path);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong.status().message(), HasSubstr(kGrailModelFormat));
  EXPECT_THAT(PathModel::Load(dir.Sub("grail.pt")).status().message(), HasSubstr(kPathModelFormat));
}

TEST(PathModelTest, BadConfigsAreRefused) {
  PathConfig config;
  config.num_layers = 0;
  EXPECT_EQ(PathModel::Create(config, Relations(1), 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PathModel::Create({}, {}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(PathModel::Create({}, Relations(1), 0, "tpu").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Full ranking by hand: every entity's score from one query alone, filtered by the graph's
// and the test set's answers. Returns the rank and the count of candidates it is among.
std::pair<double, int64_t> RankByHand(const PathModel& model, const GraphView& graph,
                                      absl::Span<const Triple> test, const Triple& f, bool tail) {
  const EntityId source = tail ? f.head : f.tail;
  const EntityId answer = tail ? f.tail : f.head;
  const int32_t relation = static_cast<int32_t>(f.relation) + (tail ? 0 : model.num_relations());
  const auto scores =
      AllScores(model, graph, {{source, relation, {}, std::nullopt}}, model.config().radius())[0];
  double greater = 0, equal = 0;
  int64_t candidates = 0;
  for (uint32_t e = 0; e < graph.num_entities(); ++e) {
    if (e == source || e == answer) continue;
    const Triple candidate = tail ? Triple{f.head, f.relation, e} : Triple{e, f.relation, f.tail};
    const bool known = graph.HasFact(candidate.head, candidate.relation, candidate.tail) ||
                       std::any_of(test.begin(), test.end(), [&](const Triple& t) {
                         return t.head == candidate.head && t.relation == candidate.relation &&
                                t.tail == candidate.tail;
                       });
    if (known) continue;
    ++candidates;
    greater += scores[e] > scores[answer];
    equal += scores[e] == scores[answer];
  }
  return {1 + greater + equal / 2, candidates};
}

TEST(PathEvaluationTest, FullRankingIsTheFilteredRankAmongEveryEntity) {
  PathConfig config;
  config.num_layers = 2;
  config.dim = 8;
  absl::StatusOr<std::unique_ptr<PathModel>> model = PathModel::Create(config, Relations(3), 9);
  ASSERT_TRUE(model.ok());
  const StaticGraph graph = RandomGraph(50, 100, 3, 4);
  std::vector<Triple> test;
  SeededRandom random(8);
  while (test.size() < 12) {
    const Triple t{static_cast<EntityId>(random.Uniform(50)),
                   static_cast<RelationId>(random.Uniform(3)),
                   static_cast<EntityId>(random.Uniform(50))};
    if (t.head != t.tail && !graph.HasFact(t.head, t.relation, t.tail)) test.push_back(t);
  }
  test.push_back({test[0].head, test[0].relation, (test[0].tail + 1) % 50});  // filtered pair
  PathEvaluationOptions options;
  options.negatives = 5;
  options.scoring.batch_queries = 4;
  options.scoring.threads = 2;
  absl::StatusOr<EvaluationResult> result = EvaluatePath(**model, graph, {}, test, options);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->full.has_value());
  double mrr = 0, hits_at_3 = 0, hits_at_10_of_50 = 0;
  for (const Triple& f : test) {
    for (bool tail : {true, false}) {
      const auto [rank, candidates] = RankByHand(**model, graph, test, f, tail);
      mrr += 1 / rank / (2.0 * test.size());
      hits_at_3 += (rank <= 3) / (2.0 * test.size());
      hits_at_10_of_50 += ExpectedHitsAmongSamples(rank, candidates, 10, 50) / (2.0 * test.size());
    }
  }
  EXPECT_NEAR(result->full->mrr, mrr, 1e-9);
  EXPECT_NEAR(result->full->hits_at_3, hits_at_3, 1e-9);
  EXPECT_NEAR(result->full->hits_at_10_of_50, hits_at_10_of_50, 1e-9);
  EXPECT_LT(result->full->hits_at_10_of_50, 1.0);
  EXPECT_EQ(result->n, static_cast<int64_t>(test.size()));
  EXPECT_GT(result->auc_pr, 0);
  EXPECT_THAT(result->ToJson(), HasSubstr("\"full_mrr\":"));
}

// Each copy is a component of its own on fresh entities, of 2 to 4 entities, and shaped like
// the graph: what a copied entity has in the copy (relation and direction of each fact) some
// entity of the graph has. Every relation starts as many copies, and walks grow past one fact.
TEST(DetachedWalkCopiesTest, AreSmallComponentsOfFreshEntitiesShapedLikeTheGraph) {
  // Chain()'s entities take distinct roles, so a copy that turned a fact round would show.
  const StaticGraph graph = Chain();
  const EntityId n = graph.num_entities();
  constexpr int kCopies = 30;
  const std::vector<Triple> copies = DetachedWalkCopies(graph, kCopies, 11);
  EXPECT_EQ(copies, DetachedWalkCopies(graph, kCopies, 11));
  EXPECT_NE(copies, DetachedWalkCopies(graph, kCopies, 12));
  ASSERT_FALSE(copies.empty());

  // Components by union-find over the copies' entities.
  EntityId end = n;
  for (const Triple& t : copies) {
    ASSERT_GE(std::min(t.head, t.tail), n) << "a copy reuses an entity of the graph";
    end = std::max({end, t.head + 1, t.tail + 1});
  }
  std::vector<EntityId> parent(end);
  for (EntityId e = 0; e < end; ++e) parent[e] = e;
  auto find = [&](EntityId e) {
    while (parent[e] != e) e = parent[e] = parent[parent[e]];
    return e;
  };
  for (const Triple& t : copies) parent[find(t.head)] = find(t.tail);
  std::map<EntityId, std::set<EntityId>> components;
  for (const Triple& t : copies) {
    components[find(t.head)].insert(t.head);
    components[find(t.tail)].insert(t.tail);
  }
  EXPECT_EQ(components.size(), kCopies * graph.num_relations());
  size_t largest = 0;
  for (const auto& [root, members] : components) {
    EXPECT_GE(members.size(), 2u);
    EXPECT_LE(members.size(), 4u);
    largest = std::max(largest, members.size());
  }
  EXPECT_GT(largest, 2u);
  EXPECT_EQ(end - n, [&] {
    size_t total = 0;
    for (const auto& [root, members] : components) total += members.size();
    return total;
  }()) << "fresh entities are numbered without gaps";

  // (relation, is head) of each fact an entity takes part in.
  auto roles = [](absl::Span<const Triple> facts, EntityId e) {
    std::set<std::pair<RelationId, bool>> r;
    for (const Triple& t : facts) {
      if (t.head == e) r.insert({t.relation, true});
      if (t.tail == e) r.insert({t.relation, false});
    }
    return r;
  };
  const std::vector<Triple> facts = graph.Facts();
  std::vector<std::set<std::pair<RelationId, bool>>> graph_roles;
  for (EntityId e = 0; e < n; ++e) graph_roles.push_back(roles(facts, e));
  for (EntityId v = n; v < end; ++v) {
    const std::set<std::pair<RelationId, bool>> copied = roles(copies, v);
    EXPECT_TRUE(std::any_of(graph_roles.begin(), graph_roles.end(),
                            [&](const auto& original) {
                              return std::includes(original.begin(), original.end(), copied.begin(),
                                                   copied.end());
                            }))
        << "entity " << v << " of the copies has roles no entity of the graph has";
  }
}

// Two runs whose steps compute the same math in another float summation order agree only
// for a while: each step's rounding (~1e-7 of a loss) is carried into the parameters, and
// once a ReLU or Adam's normalisation turns on such a difference the runs part exponentially
// (measured: two layouts of one 88-step run agreed within 2e-7 a step for 68 steps, then
// parted by 1e-4 within 17, and by 1e-2 in a score; the step where they part moves with the
// build and the CPU). So these comparisons run kComparedSteps steps, far inside that horizon,
// and compare every step's loss, which a wrong gradient in any step moves by orders more.
constexpr int kComparedSteps = 16;

struct ComparedRun {
  std::vector<double> step_losses;  // steps 1 .. kComparedSteps - 1 (StepReport)
  double run_loss = 0;              // over all kComparedSteps (the stopped epoch's report)
  std::vector<std::vector<float>> scores;
};

void ExpectSameRun(const ComparedRun& a, const ComparedRun& b) {
  ASSERT_EQ(a.step_losses.size(), static_cast<size_t>(kComparedSteps - 1));
  ASSERT_EQ(b.step_losses.size(), a.step_losses.size());
  for (size_t i = 0; i < a.step_losses.size(); ++i) {
    EXPECT_NEAR(a.step_losses[i], b.step_losses[i], 1e-5) << "step " << i + 1;
  }
  EXPECT_NEAR(a.run_loss, b.run_loss, 1e-5);
  ASSERT_FALSE(a.scores.empty());
  ASSERT_EQ(a.scores.size(), b.scores.size());
  for (size_t q = 0; q < a.scores.size(); ++q) {
    ASSERT_EQ(a.scores[q].size(), b.scores[q].size());
    for (size_t e = 0; e < a.scores[q].size(); ++e) {
      EXPECT_NEAR(a.scores[q][e], b.scores[q][e], 1e-4) << "query " << q << " entity " << e;
    }
  }
}

class PathTrainingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    UseGraphs(GenerateRuleGraph(kEntities, 1, "a"), GenerateRuleGraph(kEntities, 2, "b"));
  }

  // Trains on `train` (a tenth of its rule facts for validation) and tests on `test`, whose
  // graph holds 60% of its rule facts, the other 40% being the test queries.
  void UseGraphs(const RuleGraph& train, const RuleGraph& test) {
    std::vector<NamedTriple> train_facts = train.body;
    valid_.clear();
    for (size_t i = 0; i < train.targets.size(); ++i) {
      (i % 10 == 0 ? valid_ : train_facts).push_back(train.targets[i]);
    }
    train_ = IndexedTriples();
    IndexTriples(train_facts, &train_);
    std::vector<NamedTriple> graph = test.body, held_out;
    for (size_t i = 0; i < test.targets.size(); ++i) {
      (i % 5 < 2 ? held_out : graph).push_back(test.targets[i]);
    }
    test_indexed_ = IndexedTriples();
    IndexTriples(graph, &test_indexed_);
    test_ids_.clear();
    for (const NamedTriple& t : held_out) {
      test_ids_.push_back({*test_indexed_.entities.Find(t.head),
                           *test_indexed_.relations.Find(t.relation),
                           *test_indexed_.entities.Find(t.tail)});
    }
  }

  PathTrainOptions Options() const {
    PathTrainOptions options;
    options.model.num_layers = 2;  // the rule has length 2
    options.model.dim = 16;
    options.epochs = 4;
    options.batch_size = 32;
    options.negatives = 16;
    options.threads = 1;
    options.seed = 5;
    return options;
  }

  StaticGraph UnseenGraph() const {
    return StaticGraph(test_indexed_.entities.size(), test_indexed_.triples);
  }

  // `model`'s scores of every entity of the unseen graph for two of its queries: what the
  // tests that claim two runs train the same model compare.
  std::vector<std::vector<float>> UnseenScores(const PathModel& model) const {
    return AllScores(model, UnseenGraph(), {{0, 0, {}, std::nullopt}, {7, 3, {}, std::nullopt}}, 2);
  }

  // A run of `options` stopped after kComparedSteps steps, and its model's scores of two
  // queries on the unseen graph (ComparedRun).
  ComparedRun RunComparedSteps(PathTrainOptions options) const {
    ComparedRun run;
    options.max_steps = kComparedSteps;
    absl::StatusOr<std::unique_ptr<PathModel>> model = TrainPath(
        train_, valid_, options, [&](const EpochReport& r) { run.run_loss = r.loss; },
        [&](const StepReport& s) { run.step_losses.push_back(s.loss); });
    EXPECT_TRUE(model.ok()) << model.status();
    if (!model.ok()) return run;
    run.scores = UnseenScores(**model);
    return run;
  }

  // `prune`: the budget the rankings are pruned to (none: exact).
  EvaluationResult EvaluateOnUnseenGraph(const PathModel& model, PathBudget prune = {}) {
    const RelationMap relations =
        MapRelationsByName(test_indexed_.relations.names(), model.relations());
    const StaticGraph graph = UnseenGraph();
    PathEvaluationOptions options;
    options.negatives = 10;
    options.scoring.prune = prune;
    absl::StatusOr<EvaluationResult> result =
        EvaluatePath(model, graph, relations, test_ids_, options);
    EXPECT_TRUE(result.ok()) << result.status();
    return result.ok() ? *result : EvaluationResult();
  }

  static constexpr int kEntities = 200;
  std::vector<NamedTriple> valid_;
  IndexedTriples train_, test_indexed_;
  std::vector<Triple> test_ids_;
};

// The rule target = r1 ∘ r2 pins the answer among 200 entities: a model that learnt it ranks
// the true tail first on a graph it never saw; an untrained one ranks it near the middle.
TEST_F(PathTrainingTest, LearnsAPathRuleAndRanksItsAnswerFirstOnAnUnseenGraph) {
  std::vector<EpochReport> epochs;
  absl::StatusOr<std::unique_ptr<PathModel>> model =
      TrainPath(train_, valid_, Options(), [&](const EpochReport& r) { epochs.push_back(r); });
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(epochs.size(), 4u);
  EXPECT_LT(epochs.back().loss, epochs.front().loss);
  ASSERT_TRUE(epochs.back().valid_mrr.has_value());
  const EvaluationResult trained = EvaluateOnUnseenGraph(**model);
  ASSERT_TRUE(trained.full.has_value());
  // Only the tail query follows the rule forwards; the head query (t, target^-1, ?) follows
  // it backwards, r2^-1 then r1^-1, which pins the answer just as well.
  EXPECT_GT(trained.full->hits_at_1, 0.9);
  EXPECT_GT(trained.hits_at_1, 0.9);
  EXPECT_GT(trained.auc_pr, 0.95);

  absl::StatusOr<std::unique_ptr<PathModel>> untrained =
      PathModel::Create(Options().model, train_.relations.names(), Options().seed);
  ASSERT_TRUE(untrained.ok());
  EXPECT_LT(EvaluateOnUnseenGraph(**untrained).full->hits_at_1, 0.3);
}

// With A*Net's learned priority, trained with a tenth of the entities per layer: on the unseen
// graph, ranked with 20 entities a layer (a tenth), the answer comes first, where an untrained
// model ranks it near the middle.
TEST_F(PathTrainingTest, TrainedPrunedALearnedPriorityRanksTheRulesAnswerFirstPruned) {
  PathTrainOptions options = Options();
  options.model.priority = true;
  options.model.prune_node_ratio = 0.1;
  std::vector<double> losses;
  absl::StatusOr<std::unique_ptr<PathModel>> trained =
      TrainPath(train_, valid_, options, [&](const EpochReport& r) { losses.push_back(r.loss); });
  ASSERT_TRUE(trained.ok()) << trained.status();
  ASSERT_EQ(losses.size(), 4u);
  EXPECT_LT(losses.back(), losses.front());
  EXPECT_TRUE((*trained)->config().priority);
  const PathBudget a_tenth{0, 0, kEntities / 10};
  const EvaluationResult pruned = EvaluateOnUnseenGraph(**trained, a_tenth);
  ASSERT_TRUE(pruned.full.has_value());
  EXPECT_GT(pruned.full->hits_at_1, 0.9);

  absl::StatusOr<std::unique_ptr<PathModel>> untrained =
      PathModel::Create(options.model, train_.relations.names(), options.seed);
  ASSERT_TRUE(untrained.ok());
  const EvaluationResult chance = EvaluateOnUnseenGraph(**untrained, a_tenth);
  ASSERT_TRUE(chance.full.has_value());
  EXPECT_LT(chance.full->hits_at_1, 0.3);
}

// The copies change what a step sees (their entities are drawn as negatives), so a run with
// them trains another model, and its checkpoint is another run's.
TEST_F(PathTrainingTest, DetachedWalksChangeTrainingAndAreTheCheckpointsRun) {
  ScopedTempDir dir;
  PathTrainOptions without = Options();
  without.epochs = 1;
  without.model.reach_mask = false;
  without.checkpoint_dir = dir.Sub("run");
  std::vector<EpochReport> runs[2];
  ASSERT_TRUE(
      TrainPath(train_, valid_, without, [&](const EpochReport& r) { runs[0].push_back(r); }).ok());
  PathTrainOptions with = without;
  with.checkpoint_dir.clear();
  with.detached_walks = 4;
  ASSERT_TRUE(
      TrainPath(train_, valid_, with, [&](const EpochReport& r) { runs[1].push_back(r); }).ok());
  ASSERT_EQ(runs[0].size(), 1u);
  ASSERT_EQ(runs[1].size(), 1u);
  EXPECT_NE(runs[0][0].loss, runs[1][0].loss);

  with.checkpoint_dir = dir.Sub("run");
  with.resume = true;
  with.epochs = 2;
  absl::StatusOr<std::unique_ptr<PathModel>> refused = TrainPath(train_, valid_, with);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("another run"));

  with.detached_walks = -1;
  with.resume = false;
  with.checkpoint_dir.clear();
  EXPECT_EQ(TrainPath(train_, valid_, with).status().code(), absl::StatusCode::kInvalidArgument);
}

// Drawn as a negative, the source changes what a step sees, so the run trains another model
// (one that learns not to rank the source over the answer) and its checkpoint is another run's.
TEST_F(PathTrainingTest, SourceNegativesChangeTrainingAndAreTheCheckpointsRun) {
  ScopedTempDir dir;
  PathTrainOptions without = Options();
  without.epochs = 1;
  without.model.reach_mask = false;
  without.checkpoint_dir = dir.Sub("run");
  std::vector<EpochReport> runs[2];
  ASSERT_TRUE(
      TrainPath(train_, valid_, without, [&](const EpochReport& r) { runs[0].push_back(r); }).ok());
  PathTrainOptions with = without;
  with.checkpoint_dir.clear();
  with.source_negatives = true;
  ASSERT_TRUE(
      TrainPath(train_, valid_, with, [&](const EpochReport& r) { runs[1].push_back(r); }).ok());
  ASSERT_EQ(runs[0].size(), 1u);
  ASSERT_EQ(runs[1].size(), 1u);
  EXPECT_NE(runs[0][0].loss, runs[1][0].loss);

  with.checkpoint_dir = dir.Sub("run");
  with.resume = true;
  with.epochs = 2;
  absl::StatusOr<std::unique_ptr<PathModel>> refused = TrainPath(train_, valid_, with);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("another run"));
}

// A step that runs each query on its candidates' subgraph trains the model that running it on
// the source's whole neighbourhood trains: the same loss at every step and the same scores, up
// to summation order (compared as RunComparedSteps says). With and without the reach mask, and
// without it but with the reach feature.
TEST_F(PathTrainingTest, TrainingOnTheCandidatesSubgraphEqualsTrainingOnTheWholeNeighbourhood) {
  for (auto [reach_mask, reach_feature, detached_walks] :
       {std::tuple{true, false, 0}, {false, false, 0}, {false, true, 0}, {false, true, 3}}) {
    SCOPED_TRACE(absl::StrCat("reach mask ", reach_mask, " feature ", reach_feature, " walks ",
                              detached_walks));
    ComparedRun runs[2];
    for (bool candidates_only : {true, false}) {
      PathTrainOptions options = Options();
      options.model.reach_mask = reach_mask;
      options.model.reach_feature = reach_feature;
      options.detached_walks = detached_walks;
      options.candidates_only = candidates_only;
      runs[candidates_only] = RunComparedSteps(options);
    }
    ExpectSameRun(runs[1], runs[0]);
  }
}

TEST_F(PathTrainingTest, TrainingResumedFromACheckpointEqualsTrainingStraight) {
  ScopedTempDir dir;
  PathTrainOptions straight = Options();
  absl::StatusOr<std::unique_ptr<PathModel>> reference = TrainPath(train_, valid_, straight);
  ASSERT_TRUE(reference.ok()) << reference.status();

  PathTrainOptions first = Options();
  first.epochs = 2;
  first.checkpoint_dir = dir.Sub("run");
  ASSERT_TRUE(TrainPath(train_, valid_, first).ok());
  EXPECT_TRUE(std::filesystem::exists(dir.Sub("run/state.json")));
  PathTrainOptions rest = Options();
  rest.checkpoint_dir = dir.Sub("run");
  rest.resume = true;
  std::vector<int> epochs_run;
  absl::StatusOr<std::unique_ptr<PathModel>> resumed =
      TrainPath(train_, valid_, rest, [&](const EpochReport& r) { epochs_run.push_back(r.epoch); });
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_THAT(epochs_run, ElementsAre(3, 4));
  EXPECT_EQ(UnseenScores(**reference), UnseenScores(**resumed));

  // Another run's checkpoint is refused, not silently continued.
  PathTrainOptions other = rest;
  other.seed = 6;
  absl::StatusOr<std::unique_ptr<PathModel>> refused = TrainPath(train_, valid_, other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("another run"));
}

// A time budget ends the epoch under way when it runs out: a budget smaller than one step
// trains one step, validates and reports that epoch as cut, and no other epoch starts.
TEST_F(PathTrainingTest, ATimeBudgetEndsTheEpochUnderWayAndKeepsItsValidatedModel) {
  PathTrainOptions options = Options();
  options.epochs = 50;
  options.batch_size = 8;
  options.time_budget_seconds = 1e-6;
  std::vector<EpochReport> epochs;
  absl::StatusOr<std::unique_ptr<PathModel>> model =
      TrainPath(train_, valid_, options, [&](const EpochReport& r) { epochs.push_back(r); });
  ASSERT_TRUE(model.ok()) << model.status();
  ASSERT_EQ(epochs.size(), 1u);
  EXPECT_TRUE(epochs[0].cut);
  EXPECT_TRUE(epochs[0].valid_mrr.has_value());
  EXPECT_TRUE(epochs[0].best);
  EXPECT_EQ(epochs[0].positives, options.batch_size);  // one step's queries

  options.time_budget_seconds = 0;  // none: every epoch, none cut
  options.epochs = 2;
  epochs.clear();
  ASSERT_TRUE(
      TrainPath(train_, valid_, options, [&](const EpochReport& r) { epochs.push_back(r); }).ok());
  ASSERT_EQ(epochs.size(), 2u);
  EXPECT_FALSE(epochs[1].cut);
  options.time_budget_seconds = -1;
  EXPECT_EQ(TrainPath(train_, valid_, options).status().code(), absl::StatusCode::kInvalidArgument);
}

// An ULTRA archive fine-tunes with the path family's trainer: the loss falls, the model it
// returns ranks the rule's answers first on the unseen graph (other names and ids) where the
// archive ranked them at random, and a run resumed from its checkpoint trains the model a
// straight run trains. The graphs are typed (GenerateTypedRuleGraph): on the untyped rule
// graph every relation meets every other alike in the relation graph, so ULTRA cannot tell
// the rule's relations from the distractors and learns little more than "two facts away"
// (full MRR 0.05 -> 0.04..0.11 over 12 seeds, below the random start on some machines).
TEST_F(PathTrainingTest,
       FineTuningAnUltraArchiveImprovesItOnAnUnseenGraphAndResumesAsAStraightRun) {
  // The unseen graph's facts reversed: its relations get other ids than the training
  // graph's (br4 is 0, ar4 is 3) as well as other names.
  RuleGraph unseen = GenerateTypedRuleGraph(kEntities / 2, 2, "b");
  std::reverse(unseen.body.begin(), unseen.body.end());
  UseGraphs(GenerateTypedRuleGraph(kEntities / 2, 1, "a"), unseen);
  ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<PathModel>> initial =
      CreateUltraModel(SmallUltraConfig(/*layers=*/2, /*dim=*/16), 3);
  ASSERT_TRUE(initial.ok()) << initial.status();
  ASSERT_TRUE((*initial)->Save(dir.Sub("ultra.pt")).ok());

  PathTrainOptions options = Options();
  options.init = dir.Sub("ultra.pt");
  options.remove_one_hop = false;
  options.learning_rate = 5e-3;
  options.epochs = 3;
  std::vector<EpochReport> epochs;
  absl::StatusOr<std::unique_ptr<PathModel>> tuned =
      TrainPath(train_, valid_, options, [&](const EpochReport& r) { epochs.push_back(r); });
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  ASSERT_EQ(epochs.size(), 3u);
  EXPECT_LT(epochs.back().loss, epochs.front().loss);
  EXPECT_TRUE((*tuned)->open_vocabulary());

  // ULTRA reads the unseen graph's relations as they are, by their place in it.
  const StaticGraph graph = UnseenGraph();
  const RelationMap identity;
  PathEvaluationOptions evaluation;
  evaluation.negatives = 10;
  absl::StatusOr<EvaluationResult> before =
      EvaluatePath(**initial, graph, identity, test_ids_, evaluation);
  absl::StatusOr<EvaluationResult> after =
      EvaluatePath(**tuned, graph, identity, test_ids_, evaluation);
  ASSERT_TRUE(before.ok() && after.ok()) << before.status() << after.status();
  // Three epochs from random weights, seeds 1..12: full MRR 0.02 before, 0.95..1.0 after;
  // Hits@1 against 10 negatives 0.075 before, 0.95..1.0 after.
  EXPECT_LT(before->full->mrr, 0.3);
  EXPECT_GT(after->full->mrr, 0.8);
  EXPECT_GT(after->hits_at_1, 0.8);

  PathTrainOptions first = options;
  first.epochs = 2;
  first.checkpoint_dir = dir.Sub("run");
  ASSERT_TRUE(TrainPath(train_, valid_, first).ok());
  PathTrainOptions rest = options;
  rest.checkpoint_dir = dir.Sub("run");
  rest.resume = true;
  absl::StatusOr<std::unique_ptr<PathModel>> resumed = TrainPath(train_, valid_, rest);
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  EXPECT_EQ(UnseenScores(**tuned), UnseenScores(**resumed));

  // A model with a vocabulary other than the training graph's is refused.
  absl::StatusOr<std::unique_ptr<PathModel>> other =
      PathModel::Create(Options().model, {"x", "y"}, 3);
  ASSERT_TRUE(other.ok());
  ASSERT_TRUE((*other)->Save(dir.Sub("other.pt")).ok());
  PathTrainOptions mismatched = Options();
  mismatched.init = dir.Sub("other.pt");
  EXPECT_THAT(TrainPath(train_, valid_, mismatched).status().message(),
              HasSubstr("relation vocabulary"));
}

// The batches are drawn in step order whatever the builder threads: a run whose inputs are
// made 3 steps ahead trains the model of one made 1 step ahead.
TEST_F(PathTrainingTest, InputsMadeFurtherAheadTrainTheSameModel) {
  std::vector<EpochReport> one_ahead;
  absl::StatusOr<std::unique_ptr<PathModel>> reference =
      TrainPath(train_, valid_, Options(), [&](const EpochReport& r) { one_ahead.push_back(r); });
  ASSERT_TRUE(reference.ok()) << reference.status();
  PathTrainOptions options = Options();
  options.input_threads = 3;
  std::vector<EpochReport> three_ahead;
  absl::StatusOr<std::unique_ptr<PathModel>> ahead =
      TrainPath(train_, valid_, options, [&](const EpochReport& r) { three_ahead.push_back(r); });
  ASSERT_TRUE(ahead.ok()) << ahead.status();
  ASSERT_EQ(three_ahead.size(), one_ahead.size());
  for (size_t i = 0; i < one_ahead.size(); ++i) {
    EXPECT_EQ(three_ahead[i].loss, one_ahead[i].loss) << "epoch " << i + 1;
    EXPECT_EQ(three_ahead[i].valid_mrr, one_ahead[i].valid_mrr) << "epoch " << i + 1;
  }
  EXPECT_EQ(UnseenScores(**reference), UnseenScores(**ahead));
  options.input_threads = -1;
  EXPECT_EQ(TrainPath(train_, valid_, options).status().code(), absl::StatusCode::kInvalidArgument);
}

// A step accumulated over passes is the step of one batch of all its queries: two passes of 16
// train the model one batch of 32 trains (the same loss at every step, and the same scores, up
// to float summation order), a step's left-out facts included; each pass alone leaving out only
// its own queries' facts would not (the removals of one pass change the other's graph here).
TEST_F(PathTrainingTest, AStepAccumulatedOverPassesTrainsTheModelOfOneBatch) {
  auto options = [&](int batch_size, int accumulate) {
    PathTrainOptions o = Options();
    o.model.reach_mask = false;  // every query's graph is the whole graph
    o.batch_size = batch_size;
    o.accumulate = accumulate;
    return o;
  };
  const ComparedRun one_batch = RunComparedSteps(options(32, 1));
  const ComparedRun passes = RunComparedSteps(options(16, 2));
  ExpectSameRun(passes, one_batch);
  // Not a vacuous match: half the batch without accumulation trains another model.
  const ComparedRun smaller = RunComparedSteps(options(16, 1));
  ASSERT_EQ(smaller.step_losses.size(), one_batch.step_losses.size());
  EXPECT_GT(std::abs(smaller.step_losses[0] - one_batch.step_losses[0]), 1e-4);

  PathTrainOptions bad = Options();
  bad.accumulate = 0;
  EXPECT_EQ(TrainPath(train_, valid_, bad).status().code(), absl::StatusCode::kInvalidArgument);
}

// A step's layout is the cost rule's unless forced; forced either way, the run trains the same
// model up to the order of float sums (the layouts compute the same scores), and the per-edge
// formulation, which has no shared layout, refuses to be forced into one.
TEST_F(PathTrainingTest, ABatchLayoutForcedEitherWayTrainsTheSameModel) {
  std::map<PathLayout, ComparedRun> runs;
  for (PathLayout layout : {PathLayout::kShared, PathLayout::kDisjoint}) {
    PathTrainOptions options = Options();
    options.model.reach_mask = false;  // a whole neighbourhood per query: either layout fits
    options.layout = layout;
    runs[layout] = RunComparedSteps(options);
  }
  ExpectSameRun(runs[PathLayout::kShared], runs[PathLayout::kDisjoint]);

  PathTrainOptions per_edge = Options();
  per_edge.model.message_passing = PathMessagePassing::kPerEdge;
  per_edge.layout = PathLayout::kShared;
  EXPECT_THAT(TrainPath(train_, valid_, per_edge).status().message(), HasSubstr("fused"));
}

// A run killed within an epoch resumes from its last checkpoint within that epoch: it trains
// the model a run never stopped trains, reports that epoch's loss whole, and its directory
// keeps one checkpoint's files.
TEST_F(PathTrainingTest, TrainingResumedFromWithinAnEpochEqualsTrainingStraight) {
  std::vector<EpochReport> straight;
  int64_t steps_per_epoch = 0;
  absl::StatusOr<std::unique_ptr<PathModel>> reference = TrainPath(
      train_, valid_, Options(), [&](const EpochReport& r) { straight.push_back(r); },
      [&](const StepReport& s) { steps_per_epoch = std::max(steps_per_epoch, s.steps_done); });
  ASSERT_TRUE(reference.ok()) << reference.status();
  ASSERT_EQ(straight.size(), 4u);
  ASSERT_GE(steps_per_epoch, 4);

  ScopedTempDir dir;
  PathTrainOptions options = Options();
  options.checkpoint_dir = dir.Sub("run") + "/";  // as a user may type it
  options.checkpoint_every_steps = 2;
  // Inputs made 3 steps ahead: a checkpoint holds the generator as its step left it, before
  // the draws of the steps made ahead.
  options.input_threads = 3;
  options.resume = true;
  // The process dies after step 3 of epoch 2: its last checkpoint is the one after step 2.
  struct Killed {};
  EXPECT_THROW(TrainPath(train_, valid_, options, nullptr,
                         [](const StepReport& s) {
                           if (s.epoch == 2 && s.steps_done == 3) throw Killed{};
                         }),
               Killed);
  std::vector<EpochReport> resumed_epochs;
  std::vector<std::pair<int, int64_t>> resumed_steps;
  absl::StatusOr<std::unique_ptr<PathModel>> resumed = TrainPath(
      train_, valid_, options, [&](const EpochReport& r) { resumed_epochs.push_back(r); },
      [&](const StepReport& s) { resumed_steps.emplace_back(s.epoch, s.steps_done); });
  ASSERT_TRUE(resumed.ok()) << resumed.status();
  ASSERT_EQ(resumed_epochs.size(), 3u);
  ASSERT_FALSE(resumed_steps.empty());
  EXPECT_EQ(resumed_steps.front(), std::make_pair(2, int64_t{3}));  // step 3 is trained again
  for (size_t i = 0; i < resumed_epochs.size(); ++i) {
    EXPECT_EQ(resumed_epochs[i].epoch, straight[i + 1].epoch);
    EXPECT_EQ(resumed_epochs[i].positives, straight[i + 1].positives);
    EXPECT_DOUBLE_EQ(resumed_epochs[i].loss, straight[i + 1].loss) << "epoch " << i + 2;
    EXPECT_EQ(resumed_epochs[i].valid_mrr, straight[i + 1].valid_mrr) << "epoch " << i + 2;
  }
  EXPECT_EQ(UnseenScores(**reference), UnseenScores(**resumed));

  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir.Sub("run"))) {
    files.push_back(entry.path().filename().string());
  }
  EXPECT_THAT(files, UnorderedElementsAre("state.json", "parameters-4.pt", "optimizer-4.pt",
                                          "best-4.pt", "torch-rng-4.pt"));

  options.checkpoint_every_steps = -1;
  EXPECT_EQ(TrainPath(train_, valid_, options).status().code(), absl::StatusCode::kInvalidArgument);
  options.checkpoint_every_steps = 2;
  options.checkpoint_dir.clear();
  options.resume = false;
  EXPECT_EQ(TrainPath(train_, valid_, options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace grail
