// The learned priority (model/path/path_model.h, PathConfig::priority; A*Net's): the pass
// driven layer by layer from C++ is, unpruned, the archive's own forward, scores and gradients,
// over either batch layout; pruned, each layer propagates from at most its budget of reached
// entities along at most its share of edges, and every entity it never reached has the far
// score; a neighbourhood within the budget is exact; the archive keeps the priority, and the
// server's budget turns into a per-layer one. (Training pruned: path_model_test.cc,
// PathTrainingTest.)
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "gtest/gtest.h"
#include "model/families.h"
#include "model/path/path_batch.h"
#include "model/path/path_model.h"
#include "model/path/path_module.h"
#include "tests/testing/path_test_graph.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

std::vector<std::string> Relations(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(absl::StrCat("r", i));
  return names;
}

PathConfig PriorityConfig(bool dependent, bool short_cut) {
  PathConfig config;
  config.num_layers = 3;
  config.dim = 8;
  config.dependent = dependent;
  config.short_cut = short_cut;
  config.priority = true;
  config.prune_node_ratio = 0.25;
  return config;
}

class PriorityDriverMatchesForward : public ::testing::TestWithParam<std::tuple<bool, bool>> {};

TEST_P(PriorityDriverMatchesForward, UnprunedScoresAndGradientsForOneQueryAndForSixtyFour) {
  const auto [dependent, short_cut] = GetParam();
  auto model = PathModel::Create(PriorityConfig(dependent, short_cut), Relations(4), 3);
  ASSERT_TRUE(model.ok()) << model.status();
  const StaticGraph graph = PathTestGraph();
  const RelationMap identity;
  for (int n : {1, 64}) {
    const std::vector<PathQuery> queries = PathTestQueries(n);
    PathBatchBuilder builder;
    PathNeighbourhoodSpec spec = (*model)->Neighbourhood(&graph, &identity, 0);
    spec.layout = PathLayout::kDisjoint;
    PathBatch disjoint;
    ASSERT_TRUE(builder.Build(spec, queries, &disjoint).ok());
    ASSERT_FALSE(PrunesByPriority((*model)->module(), disjoint));
    const ForwardOutcome driven = ForwardBackward(
        **model, [&](PathModule& m) { return PrioritizedForward(m, disjoint, nullptr); });
    for (PathLayout layout : {PathLayout::kDisjoint, PathLayout::kShared}) {
      spec.layout = layout;
      PathBatch batch;
      ASSERT_TRUE(builder.Build(spec, queries, &batch).ok());
      const ForwardOutcome dense = ForwardBackward(**model, batch);
      // Scores per query node, in the same order either way.
      const std::string where =
          absl::StrCat(n, " queries, ", batch.shared() ? "shared" : "disjoint");
      ASSERT_EQ(driven.node.sizes(), dense.node.sizes()) << where;
      EXPECT_LE(RelativeDifference(driven.node, dense.node), 1e-5) << where;
      EXPECT_LE(RelativeDifference(driven.far, dense.far), 1e-5) << where;
      for (size_t i = 0; i < dense.gradients.size(); ++i) {
        EXPECT_LE(RelativeDifference(driven.gradients[i], dense.gradients[i]), 1e-5)
            << where << ", parameter " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configurations, PriorityDriverMatchesForward,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool()),
                         [](const auto& info) {
                           return absl::StrCat(std::get<0>(info.param) ? "" : "FreeRelations",
                                               std::get<1>(info.param) ? "ShortCut" : "Replace");
                         });

TEST(PriorityPruningTest, EachLayerPropagatesFromAtMostItsBudgetAndTheUnreachedHaveTheFarScore) {
  auto model = PathModel::Create(PriorityConfig(true, true), Relations(4), 5);
  ASSERT_TRUE(model.ok());
  const StaticGraph graph = PathTestGraph();
  const RelationMap identity;
  for (const int64_t k : {1, 3, 8}) {
    PathNeighbourhoodSpec spec = (*model)->Neighbourhood(&graph, &identity, 0);
    spec.prune.layer_nodes = k;
    PathBatchBuilder builder;
    PathBatch batch;
    const std::vector<PathQuery> queries = PathTestQueries(16);
    ASSERT_TRUE(builder.Build(spec, queries, &batch).ok());
    ASSERT_FALSE(batch.shared());
    ASSERT_TRUE(PrunesByPriority((*model)->module(), batch));
    PrioritizedStats stats;
    torch::Tensor node, far;
    {
      torch::NoGradGuard no_grad;
      std::tie(node, far) = PrioritizedForward((*model)->module(), batch, &stats);
    }
    ASSERT_EQ(stats.reached.size(), queries.size());
    ASSERT_EQ(stats.most_chosen.size(), queries.size());
    ASSERT_EQ(stats.most_edges.size(), queries.size());
    int64_t pruned = 0, unreached = 0;
    for (int64_t q = 0; q < batch.num_queries(); ++q) {
      const int64_t nodes = batch.node_begin[q + 1] - batch.node_begin[q];
      const int64_t edges = batch.edge_begin[q + 1] - batch.edge_begin[q];
      EXPECT_EQ(batch.query_pruned[q], nodes > k ? 1 : 0) << "query " << q;
      pruned += batch.query_pruned[q];
      EXPECT_GE(stats.most_chosen[q], 1) << "query " << q;
      if (nodes > k) {
        // Per layer: at most k entities, and at most the degree ratio (1) times k times the
        // query's mean degree of edges.
        EXPECT_LE(stats.most_chosen[q], k) << "query " << q;
        EXPECT_LE(stats.most_edges[q], std::max<int64_t>(1, k * edges / nodes)) << "query " << q;
      }
      // Each of the 3 layers reaches at most its chosen edges' destinations.
      EXPECT_LE(stats.reached[q], 1 + 3 * stats.most_edges[q]) << "query " << q;
      // The reached count and the entities whose score is not the far score agree: an
      // unreached entity has exactly the far score.
      int64_t off_far = 0;
      for (int64_t i = batch.node_begin[q]; i < batch.node_begin[q + 1]; ++i) {
        off_far += node[i].item<float>() != far[q].item<float>();
      }
      EXPECT_LE(off_far, stats.reached[q]) << "query " << q;
      unreached += nodes - stats.reached[q];
    }
    EXPECT_GT(pruned, 0) << "k " << k;
    EXPECT_GT(unreached, 0) << "k " << k;
  }
}

TEST(PriorityPruningTest, ABudgetTheNeighbourhoodFitsIsExact) {
  auto model = PathModel::Create(PriorityConfig(true, true), Relations(4), 6);
  ASSERT_TRUE(model.ok());
  const StaticGraph graph = PathTestGraph();
  const RelationMap identity;
  const std::vector<PathQuery> queries = PathTestQueries(8);
  PathBatchBuilder builder;
  PathBatch exact, within;
  PathNeighbourhoodSpec spec = (*model)->Neighbourhood(&graph, &identity, 0);
  ASSERT_TRUE(builder.Build(spec, queries, &exact).ok());
  spec.prune.layer_nodes = static_cast<int64_t>(graph.num_entities());
  ASSERT_TRUE(builder.Build(spec, queries, &within).ok());
  EXPECT_FALSE(PrunesByPriority((*model)->module(), within));
  EXPECT_THAT(within.query_pruned, ::testing::Each(0));
  absl::StatusOr<PathScores> a = (*model)->Score(exact), b = (*model)->Score(within);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t q = 0; q < exact.num_queries(); ++q) {
    for (uint32_t e = 0; e < graph.num_entities(); ++e) {
      ASSERT_NEAR(a->Of(exact, q, e), b->Of(within, q, e), 1e-5) << q << " " << e;
    }
  }
  EXPECT_TRUE(b->reached.empty());
}

TEST(PriorityPruningTest, TheServersBudgetBecomesAPerLayerOneOnlyWithAPriority) {
  auto priority = PathModel::Create(PriorityConfig(true, true), Relations(4), 1);
  PathConfig plain_config;
  plain_config.num_layers = 2;
  plain_config.dim = 4;
  auto plain = PathModel::Create(plain_config, Relations(4), 1);
  ASSERT_TRUE(priority.ok() && plain.ok());
  const PathBudget call{100, 400, 0}, cap{1000, 4000, 0};
  const PathBudget p = (*priority)->Pruning(call, cap), q = (*plain)->Pruning(call, cap);
  EXPECT_EQ(std::make_tuple(p.nodes, p.edges, p.layer_nodes), std::make_tuple(1000, 4000, 100));
  EXPECT_EQ(std::make_tuple(q.nodes, q.edges, q.layer_nodes), std::make_tuple(100, 400, 0));
}

TEST(PriorityConfigTest, OnlyTheConfigurationsItSupportsAreAccepted) {
  PathConfig pna = PriorityConfig(true, true);
  pna.pna = true;
  PathConfig unmasked = PriorityConfig(true, true);
  unmasked.reach_mask = false;
  PathConfig ratio = PriorityConfig(true, true);
  ratio.prune_node_ratio = 1.5;
  PathConfig degree = PriorityConfig(true, true);
  degree.prune_degree_ratio = 0;
  for (const PathConfig& c : {pna, unmasked, ratio, degree}) {
    auto model = PathModel::Create(c, Relations(4), 1);
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(PriorityArchiveTest, AnArchiveKeepsThePriorityAndScoresAsSaved) {
  ScopedTempDir dir;
  PathConfig config = PriorityConfig(false, true);
  config.prune_node_ratio = 0.3;
  config.prune_degree_ratio = 2;
  auto model = PathModel::Create(config, Relations(4), 8);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE((*model)->Save(dir.Sub("m.pt")).ok());
  absl::StatusOr<AnyModel> any = LoadAnyModel(dir.Sub("m.pt"));
  ASSERT_TRUE(any.ok()) << any.status();
  ASSERT_NE(any->path, nullptr);
  const PathConfig& loaded = any->path->config();
  EXPECT_TRUE(loaded.priority);
  EXPECT_DOUBLE_EQ(loaded.prune_node_ratio, 0.3);
  EXPECT_DOUBLE_EQ(loaded.prune_degree_ratio, 2);
  const StaticGraph graph = PathTestGraph();
  const RelationMap identity;
  PathNeighbourhoodSpec spec = (*model)->Neighbourhood(&graph, &identity, 0);
  spec.prune.layer_nodes = 4;
  PathBatchBuilder builder;
  PathBatch batch;
  ASSERT_TRUE(builder.Build(spec, PathTestQueries(8), &batch).ok());
  absl::StatusOr<PathScores> a = (*model)->Score(batch), b = any->path->Score(batch);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->node, b->node);
  EXPECT_EQ(a->reached, b->reached);
  EXPECT_FALSE(a->reached.empty());
}

}  // namespace
}  // namespace grail
