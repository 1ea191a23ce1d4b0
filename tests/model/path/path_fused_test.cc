// The path model over the fused operator against the per-edge formulation it replaces: the
// same scores and gradients, for every configuration, with one query and with 64, over the
// disjoint and the shared batch layout; archives written before the operator (format /1)
// load rebuilt and score as they did, a trained one included; training follows the per-edge
// formulation step for step; what a batch leaves out; the layout's cost rule.
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "model/core/archive_check.h"
#include "model/families.h"
#include "model/path/path_batch.h"
#include "model/path/path_model.h"
#include "model/path/path_module.h"
#include "tests/testing/archive_surgery.h"
#include "tests/testing/path_test_graph.h"
#include "tests/testing/rule_graph.h"
#include "tests/testing/temp_dir.h"
#include "train/path_trainer.h"

namespace grail {
namespace {

std::vector<std::string> Relations(int n) {
  std::vector<std::string> names;
  for (int i = 0; i < n; ++i) names.push_back(absl::StrCat("r", i));
  return names;
}

class FusedMatchesPerEdge : public ::testing::TestWithParam<std::tuple<bool, bool, bool, bool>> {};

TEST_P(FusedMatchesPerEdge, ScoresAndGradientsForOneQueryAndForSixtyFour) {
  const auto [pna, reach_mask, reach_feature, dependent] = GetParam();
  PathConfig config;
  config.num_layers = 3;
  config.dim = 8;
  config.pna = pna;
  config.reach_mask = reach_mask;
  config.reach_feature = reach_feature;
  config.dependent = dependent;
  config.pna_delta = 1.3;
  PathConfig per_edge_config = config;
  per_edge_config.message_passing = PathMessagePassing::kPerEdge;
  // The same seed draws the same parameters.
  auto per_edge = PathModel::Create(per_edge_config, Relations(4), 3);
  auto fused = PathModel::Create(config, Relations(4), 3);
  ASSERT_TRUE(per_edge.ok() && fused.ok());
  const StaticGraph graph = PathTestGraph();
  const RelationMap identity;
  for (int n : {1, 64}) {
    const std::vector<PathQuery> queries = PathTestQueries(n);
    PathBatchBuilder builder;
    PathBatch reference;
    ASSERT_TRUE(
        builder.Build((*per_edge)->Neighbourhood(&graph, &identity, 0), queries, &reference).ok());
    ASSERT_FALSE(reference.shared());
    const ForwardOutcome expected = ForwardBackward(**per_edge, reference);
    for (PathLayout layout : {PathLayout::kDisjoint, PathLayout::kShared}) {
      PathNeighbourhoodSpec spec = (*fused)->Neighbourhood(&graph, &identity, 0);
      spec.layout = layout;
      PathBatch batch;
      ASSERT_TRUE(builder.Build(spec, queries, &batch).ok());
      EXPECT_EQ(batch.shared(), n > 1 && layout == PathLayout::kShared);
      const ForwardOutcome got = ForwardBackward(**fused, batch);
      const std::string where =
          absl::StrCat(n, " queries, ", batch.shared() ? "shared" : "disjoint");
      ASSERT_EQ(got.node.sizes(), expected.node.sizes()) << where;
      EXPECT_LE(RelativeDifference(got.node, expected.node), 1e-5) << where;
      EXPECT_LE(RelativeDifference(got.far, expected.far), 1e-5) << where;
      ASSERT_EQ(got.gradients.size(), expected.gradients.size());
      for (size_t i = 0; i < got.gradients.size(); ++i) {
        EXPECT_LE(RelativeDifference(got.gradients[i], expected.gradients[i]), 1e-5)
            << where << ", parameter " << i;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configurations, FusedMatchesPerEdge,
                         ::testing::Combine(::testing::Bool(), ::testing::Bool(), ::testing::Bool(),
                                            ::testing::Bool()),
                         [](const auto& info) {
                           return absl::StrCat(std::get<0>(info.param) ? "Pna" : "Sum",
                                               std::get<1>(info.param) ? "" : "Unmasked",
                                               std::get<2>(info.param) ? "ReachFeature" : "",
                                               std::get<3>(info.param) ? "" : "FreeRelations");
                         });

// Every entity's score for each query of `queries`, built one query at a time.
std::vector<float> Scores(const PathModel& model, const GraphView& graph,
                          const std::vector<PathQuery>& queries) {
  const RelationMap identity;
  PathBatchBuilder builder;
  PathBatch batch;
  EXPECT_TRUE(builder.Build(model.Neighbourhood(&graph, &identity, 0), queries, &batch).ok());
  absl::StatusOr<PathScores> scores = model.Score(batch);
  EXPECT_TRUE(scores.ok()) << scores.status();
  std::vector<float> all;
  if (!scores.ok()) return all;
  for (size_t q = 0; q < queries.size(); ++q) {
    for (uint32_t e = 0; e < graph.num_entities(); ++e) {
      all.push_back(scores->Of(batch, static_cast<int64_t>(q), e));
    }
  }
  return all;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  float scale = 1e-12f;
  for (float x : expected) scale = std::max(scale, std::fabs(x));
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], expected[i], 1e-5 * scale) << "score " << i;
  }
}

TEST(PathArchiveTest, AnArchiveOfTheFormerFormatLoadsRebuiltAndScoresAsItDid) {
  ScopedTempDir dir;
  PathConfig config;
  config.num_layers = 3;
  config.dim = 8;
  config.pna = true;
  config.reach_mask = false;
  config.reach_feature = true;
  config.message_passing = PathMessagePassing::kPerEdge;
  auto old = PathModel::Create(config, Relations(4), 5);
  ASSERT_TRUE(old.ok());
  (*old)->set_training_fingerprint("facts-42");
  ASSERT_TRUE((*old)->Save(dir.Sub("old.pt")).ok());
  auto loaded = PathModel::Load(dir.Sub("old.pt"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ((*loaded)->config().message_passing, PathMessagePassing::kFused);
  EXPECT_EQ((*loaded)->training_fingerprint(), "facts-42");
  const StaticGraph graph = PathTestGraph();
  const std::vector<PathQuery> queries = PathTestQueries(16);
  ExpectClose(Scores(**loaded, graph, queries), Scores(**old, graph, queries));
  // Saved again, it is an archive of the current format.
  ASSERT_TRUE((*loaded)->Save(dir.Sub("new.pt")).ok());
  absl::StatusOr<AnyModel> any = LoadAnyModel(dir.Sub("new.pt"));
  ASSERT_TRUE(any.ok()) << any.status();
  ASSERT_EQ(any->family(), ModelFamily::kPath);
  ExpectClose(Scores(*any->path, graph, queries), Scores(**old, graph, queries));
}

// An archive whose code calls an operator of ours that this build lacks (one a later build
// added) is refused saying which and why, not with TorchScript's "Unknown builtin op".
TEST(PathArchiveTest, AnArchiveCallingAnOperatorThisBuildLacksIsRefusedNamingIt) {
  ScopedTempDir dir;
  auto model = PathModel::Create(PathConfig{}, Relations(2), 5);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE((*model)->Save(dir.Sub("model.pt")).ok());
  ASSERT_TRUE(WriteWithOperatorRenamed(dir.Sub("model.pt"), dir.Sub("later.pt"), "ops.grail.rspmm",
                                       "ops.grail.rspmm_v9"));
  absl::StatusOr<std::unique_ptr<PathModel>> loaded = PathModel::Load(dir.Sub("later.pt"));
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(loaded.status().message());
  EXPECT_THAT(message, ::testing::HasSubstr("grail::rspmm_v9"));
  EXPECT_THAT(message, ::testing::HasSubstr("later build"));
  EXPECT_THAT(message, ::testing::Not(::testing::HasSubstr("Unknown builtin")));
}

// The operators an archive's code calls, as the loader checks them before TorchScript
// compiles it: ours by name, LibTorch's own (aten, prim) left to LibTorch.
TEST(PathArchiveTest, TheArchiveCheckListsTheOperatorsItsCodeCalls) {
  ScopedTempDir dir;
  PathConfig config;
  config.pna = true;
  auto model = PathModel::Create(config, Relations(2), 5);
  ASSERT_TRUE(model.ok());
  ASSERT_TRUE((*model)->Save(dir.Sub("model.pt")).ok());
  std::set<std::string> operators;
  ASSERT_TRUE(
      CheckModelArchiveBytes(ReadTextFile(dir.Sub("model.pt")), "model.pt", &operators).ok());
  EXPECT_THAT(operators,
              ::testing::UnorderedElementsAre("grail::rspmm", "grail::pna_moments",
                                              "grail::pna_combine", "grail::relational_graph"));

  ASSERT_TRUE(WriteWithOperatorRenamed(dir.Sub("model.pt"), dir.Sub("later.pt"), "ops.grail.rspmm",
                                       "ops.grail.rspmm_v9"));
  operators.clear();
  ASSERT_TRUE(
      CheckModelArchiveBytes(ReadTextFile(dir.Sub("later.pt")), "later.pt", &operators).ok());
  EXPECT_THAT(operators,
              ::testing::UnorderedElementsAre("grail::rspmm_v9", "grail::pna_moments",
                                              "grail::pna_combine", "grail::relational_graph"));
}

// A string constant that spells an operator is not a call: only the call after it is listed,
// even past a constant that holds an escaped quote.
TEST(PathArchiveTest, TheArchiveCheckSkipsStringConstantsThatSpellAnOperator) {
  ScopedTempDir dir;
  torch::jit::Module module("Quoted");
  module.define(R"(
def names(self) -> List[str]:
    return ["ops.nothere.first", 'ops.nothere.second', "a \" ops.nothere.third"]

def forward(self, x: Tensor) -> Tensor:
    return torch.relu(x)
)");
  module.save(dir.Sub("quoted.pt"));
  std::string code;
  for (const ArchiveEntry& entry : ReadArchiveEntries(dir.Sub("quoted.pt"))) {
    if (entry.name == "quoted/code/__torch__.py") code = entry.data;
  }
  ASSERT_THAT(code, ::testing::HasSubstr("ops.nothere.third"));
  const std::string bytes = ReadTextFile(dir.Sub("quoted.pt"));
  std::set<std::string> operators;
  ASSERT_TRUE(CheckModelArchiveBytes(bytes, "quoted.pt", &operators).ok());
  EXPECT_THAT(operators, ::testing::IsEmpty());

  // The same code calling an operator of ours after the constants: that call is listed.
  ASSERT_TRUE(WriteWithOperatorRenamed(dir.Sub("quoted.pt"), dir.Sub("call.pt"), "torch.relu",
                                       "ops.grail.relu"));
  ASSERT_TRUE(CheckModelArchiveBytes(ReadTextFile(dir.Sub("call.pt")), "call.pt", &operators).ok());
  EXPECT_THAT(operators, ::testing::ElementsAre("grail::relu"));
}

TEST(PathArchiveTest, AFormerArchiveWhoseParametersDoNotFitItsConfigIsRefusedByName) {
  ScopedTempDir dir;
  PathConfig config;
  config.num_layers = 2;
  config.dim = 8;
  config.message_passing = PathMessagePassing::kPerEdge;
  auto old = PathModel::Create(config, Relations(2), 5);
  ASSERT_TRUE(old.ok());
  // The archive claims three layers where its parameters hold two.
  (*old)->module().module.setattr("num_layers", int64_t{3});
  ASSERT_TRUE((*old)->Save(dir.Sub("bad.pt")).ok());
  auto loaded = PathModel::Load(dir.Sub("bad.pt"));
  ASSERT_FALSE(loaded.ok());
  EXPECT_THAT(loaded.status().message(), ::testing::HasSubstr("relation_w_2"));
}

// A model trained with the former formulation, saved, loaded (rebuilt over the operator):
// every fact of an unseen graph scores as before.
TEST(PathArchiveTest, ATrainedFormerArchiveScoresEveryFactAsBefore) {
  ScopedTempDir dir;
  const RuleGraph train = GenerateRuleGraph(40, 1, "a");
  std::vector<NamedTriple> facts = train.body;
  facts.insert(facts.end(), train.targets.begin(), train.targets.end());
  IndexedTriples indexed;
  IndexTriples(facts, &indexed);
  PathTrainOptions options;
  options.model.num_layers = 3;
  options.model.dim = 8;
  options.model.pna = true;
  options.model.message_passing = PathMessagePassing::kPerEdge;
  options.epochs = 1;
  options.batch_size = 16;
  options.negatives = 8;
  auto trained = TrainPath(indexed, {}, options);
  ASSERT_TRUE(trained.ok()) << trained.status();
  ASSERT_TRUE((*trained)->Save(dir.Sub("trained.pt")).ok());
  auto loaded = PathModel::Load(dir.Sub("trained.pt"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  // An unseen graph of the same relations.
  const RuleGraph test = GenerateRuleGraph(30, 2, "b");
  std::vector<NamedTriple> test_facts = test.body;
  test_facts.insert(test_facts.end(), test.targets.begin(), test.targets.end());
  IndexedTriples test_indexed;
  IndexTriples(test_facts, &test_indexed);
  const StaticGraph graph(test_indexed.entities.size(), test_indexed.triples);
  const RelationMap relations =
      MapRelationsByName(test_indexed.relations.names(), (*loaded)->relations());
  std::vector<PathQuery> queries;
  for (const Triple& t : test_indexed.triples) {
    queries.emplace_back(t.head, relations(t.relation));
  }
  auto scores = [&](const PathModel& model) {
    PathBatchBuilder builder;
    std::vector<float> out;
    for (size_t begin = 0; begin < queries.size(); begin += 32) {
      const std::vector<PathQuery> chunk(queries.begin() + begin,
                                         queries.begin() + std::min(queries.size(), begin + 32));
      PathBatch batch;
      EXPECT_TRUE(builder.Build(model.Neighbourhood(&graph, &relations, 0), chunk, &batch).ok());
      absl::StatusOr<PathScores> s = model.Score(batch);
      EXPECT_TRUE(s.ok());
      for (size_t q = 0; q < chunk.size(); ++q) {
        out.push_back(s->Of(batch, static_cast<int64_t>(q), test_indexed.triples[begin + q].tail));
      }
    }
    return out;
  };
  ExpectClose(scores(**loaded), scores(**trained));
}

// One epoch of training, fused against per-edge from the same seed: the same losses, step
// by step (the step's mean loss is reported to each StepReport).
TEST(PathTrainingExactnessTest, AnEpochsLossesFollowThePerEdgeFormulation) {
  const RuleGraph train = GenerateRuleGraph(40, 3, "a");
  std::vector<NamedTriple> facts = train.body;
  facts.insert(facts.end(), train.targets.begin(), train.targets.end());
  IndexedTriples indexed;
  IndexTriples(facts, &indexed);
  for (bool reach_mask : {true, false}) {
    std::vector<double> losses[2];
    for (int fused = 0; fused < 2; ++fused) {
      PathTrainOptions options;
      options.model.num_layers = 3;
      options.model.dim = 8;
      options.model.pna = true;
      options.model.reach_mask = reach_mask;
      options.model.message_passing =
          fused ? PathMessagePassing::kFused : PathMessagePassing::kPerEdge;
      options.epochs = 1;
      options.batch_size = 16;
      options.negatives = 8;
      options.adversarial_temperature = 0.5;
      auto trained = TrainPath(indexed, {}, options, nullptr,
                               [&](const StepReport& s) { losses[fused].push_back(s.loss); });
      ASSERT_TRUE(trained.ok()) << trained.status();
    }
    ASSERT_EQ(losses[0].size(), losses[1].size());
    ASSERT_GT(losses[0].size(), 10u);
    for (size_t i = 0; i < losses[0].size(); ++i) {
      EXPECT_NEAR(losses[1][i], losses[0][i], 1e-4 * std::fabs(losses[0][i]))
          << "step " << i << (reach_mask ? "" : " without the reach mask");
    }
  }
}

// Edge ids (as entity pairs) of query q's graph in `batch`, either layout.
std::vector<std::pair<int64_t, int64_t>> EdgesOf(const PathBatch& batch, int64_t q) {
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (int64_t e = 0; e < batch.num_edges(); ++e) {
    const int64_t a = batch.edge_src[e], b = batch.edge_dst[e];
    if (batch.shared()) {
      edges.emplace_back(batch.shared_entity[a], batch.shared_entity[b]);
    } else if (e >= batch.edge_begin[q] && e < batch.edge_begin[q + 1]) {
      edges.emplace_back(batch.node_entity[a], batch.node_entity[b]);
    }
  }
  return edges;
}

// A graph of one relation, for paths of 3 hops, in `layout`: each query's ball of `radius`
// (-1: the whole graph).
PathNeighbourhoodSpec OneRelation(const StaticGraph& graph, const RelationMap& identity,
                                  PathLayout layout, int radius = -1) {
  PathNeighbourhoodSpec spec;
  spec.graph = &graph;
  spec.relations = &identity;
  spec.num_relations = 1;
  spec.radius = radius;
  spec.path_length = 3;
  spec.layout = layout;
  return spec;
}

TEST(PathBatchBuildTest, AFactOneQueryLeavesOutIsLeftOutOfEveryQuerysGraph) {
  // 0 -> 1 -> 2 -> 3, and 4 -> 1.
  const StaticGraph graph(5, std::vector<Triple>{{0, 0, 1}, {1, 0, 2}, {2, 0, 3}, {4, 0, 1}});
  const RelationMap identity;
  PathQuery hides;  // leaves out every fact between 1 and 2
  hides.source = 1;
  hides.relation = 0;
  hides.unlinked = {2};
  PathQuery other(4, 0);
  for (PathLayout layout : {PathLayout::kDisjoint, PathLayout::kShared}) {
    const PathNeighbourhoodSpec spec = OneRelation(graph, identity, layout);
    PathBatchBuilder builder;
    PathBatch batch;
    ASSERT_TRUE(builder.Build(spec, {hides, other}, &batch).ok());
    ASSERT_EQ(batch.shared(), layout == PathLayout::kShared);
    for (int64_t q : {0, 1}) {
      const auto edges = EdgesOf(batch, q);
      EXPECT_EQ(std::count(edges.begin(), edges.end(), std::make_pair<int64_t, int64_t>(1, 2)), 0)
          << "query " << q;
      EXPECT_EQ(std::count(edges.begin(), edges.end(), std::make_pair<int64_t, int64_t>(2, 3)), 1)
          << "query " << q;
    }
    // Query 1 reaches 2 only through 1 -> 2: left out, 2 is unreached from 4.
    EXPECT_EQ(batch.node_dist[batch.NodeOf(1, 2)], kUnreached);
  }
  // Added alone, a query keeps the facts only other queries leave out.
  PathBatchBuilder builder;
  PathBatch alone;
  ASSERT_TRUE(builder.Add(OneRelation(graph, identity, PathLayout::kDisjoint), other, &alone).ok());
  EXPECT_EQ(alone.node_dist[alone.NodeOf(0, 2)], 2);
}

TEST(PathBatchBuildTest, TheCostRuleSharesOverlappingQueriesAndKeepsSmallOnesApart) {
  SeededRandom random(4);
  std::vector<Triple> facts;
  for (uint32_t e = 0; e + 1 < 400; ++e) facts.push_back({e, 0, e + 1});  // a long chain
  const StaticGraph graph(400, facts);
  const RelationMap identity;
  std::vector<PathQuery> queries;
  for (uint32_t s = 0; s < 16; ++s) queries.emplace_back(s * 25, 0);
  PathBatchBuilder builder;
  PathBatch batch;
  // Without the reach mask every query covers the whole chain: one shared graph.
  ASSERT_TRUE(
      builder.Build(OneRelation(graph, identity, PathLayout::kCheaper), queries, &batch).ok());
  EXPECT_TRUE(batch.shared());
  EXPECT_EQ(batch.num_forward_nodes(), 400);
  // With radius 3 each query holds 7 of the 400 entities, 16 of them 112: apart.
  ASSERT_TRUE(
      builder.Build(OneRelation(graph, identity, PathLayout::kCheaper, 3), queries, &batch).ok());
  EXPECT_FALSE(batch.shared());
  EXPECT_EQ(batch.num_forward_nodes(), 4 + 15 * 7);  // the first query starts at the chain's end
}

TEST(PathBatchBuildTest, OnAGpuTheCostRuleSharesUpToTheMeasuredAdvantage) {
  std::vector<Triple> facts;
  for (uint32_t e = 0; e + 1 < 400; ++e) facts.push_back({e, 0, e + 1});  // a long chain
  const StaticGraph graph(400, facts);
  const RelationMap identity;
  // Radius 10: each query holds 21 entities of degree 2. Sources 4 apart: a union of 25, so
  // the shared batch costs 25/21 = 1.19 times the disjoint one; 8 apart, 29/21 = 1.38.
  const std::vector<PathQuery> near = {PathQuery(100, 0), PathQuery(104, 0)};
  const std::vector<PathQuery> far = {PathQuery(100, 0), PathQuery(108, 0)};
  PathNeighbourhoodSpec spec = OneRelation(graph, identity, PathLayout::kCheaper, 10);
  PathBatchBuilder builder;
  PathBatch batch;
  ASSERT_EQ(spec.shared_advantage, 1);  // the CPU's rule
  ASSERT_TRUE(builder.Build(spec, near, &batch).ok());
  EXPECT_FALSE(batch.shared());
  EXPECT_EQ(batch.num_forward_nodes(), 2 * 21);
  spec.shared_advantage = kPathGpuSharedAdvantage;
  ASSERT_TRUE(builder.Build(spec, near, &batch).ok());
  EXPECT_TRUE(batch.shared());
  EXPECT_EQ(batch.num_forward_nodes(), 25);
  ASSERT_TRUE(builder.Build(spec, far, &batch).ok());
  EXPECT_FALSE(batch.shared());
}

}  // namespace
}  // namespace grail
