// Pruned propagation (model/path/path_batch.h, PathBudget): a query whose neighbourhood passes
// the budget propagates over at most the budget's nodes and edges, grown from the source by
// priority, with the chosen graph's own distances; one within the budget is exactly what it is
// without pruning.
#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/seeded_random.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "gtest/gtest.h"
#include "model/path/path_batch.h"

namespace grail {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::Not;

// Power-law-ish: entity i links to a few entities drawn towards the low ids, so entity 0..9
// are hubs of hundreds of facts; plus a ring so that every entity is reachable.
StaticGraph HubGraph(uint32_t entities, uint64_t seed) {
  SeededRandom random(seed);
  std::vector<Triple> triples;
  for (uint32_t i = 0; i < entities; ++i) {
    triples.push_back({i, 0, (i + 1) % entities});
    for (int k = 0; k < 3; ++k) {
      const double u = random.UniformDouble();
      const uint32_t t = static_cast<uint32_t>(u * u * u * entities);
      if (t != i) triples.push_back({i, static_cast<uint32_t>(1 + random.Uniform(3)), t});
    }
  }
  return StaticGraph(entities, triples);
}

PathNeighbourhoodSpec Spec(const GraphView& graph, int radius, PathBudget budget) {
  PathNeighbourhoodSpec spec;
  spec.graph = &graph;
  static const RelationMap* const kIdentity = new RelationMap();
  spec.relations = kIdentity;
  spec.num_relations = 4;
  spec.radius = radius;
  spec.path_length = radius < 0 ? 3 : radius;
  spec.prune = budget;
  return spec;
}

// Query q's distances recomputed by breadth-first search over the batch's own edges.
std::vector<int64_t> DistancesOverTheBatchEdges(const PathBatch& batch, int64_t q) {
  const int64_t begin = batch.node_begin[q], end = batch.node_begin[q + 1];
  std::vector<std::vector<int64_t>> out(end - begin);
  for (int64_t e = batch.edge_begin[q]; e < batch.edge_begin[q + 1]; ++e) {
    out[batch.edge_src[e] - begin].push_back(batch.edge_dst[e] - begin);
  }
  std::vector<int64_t> dist(end - begin, kUnreached);
  std::deque<int64_t> queue = {batch.source_index[q] - begin};
  dist[queue.front()] = 0;
  while (!queue.empty()) {
    const int64_t u = queue.front();
    queue.pop_front();
    for (int64_t v : out[u]) {
      if (dist[v] == kUnreached) {
        dist[v] = dist[u] + 1;
        queue.push_back(v);
      }
    }
  }
  return dist;
}

TEST(PrunedPropagationTest, ANeighbourhoodPastTheBudgetNeverPassesItAndKeepsItsOwnDistances) {
  const StaticGraph graph = HubGraph(3000, 7);
  PathBatchBuilder builder;
  int pruned = 0;
  for (const PathBudget budget : {PathBudget{50, 0}, PathBudget{200, 600}, PathBudget{400, 100}}) {
    for (const int radius : {3, -1}) {
      for (EntityId source : {0u, 1u, 5u, 777u, 2999u}) {
        PathBatch batch;
        ASSERT_TRUE(builder.Add(Spec(graph, radius, budget), {source, 1}, &batch).ok());
        EXPECT_LE(batch.num_nodes(), budget.nodes);
        if (budget.edges > 0) {
          EXPECT_LE(batch.num_edges(), budget.edges);
        }
        EXPECT_EQ(batch.node_entity[batch.source_index[0]], source);
        pruned += static_cast<int>(batch.query_pruned[0]);
        const std::vector<int64_t> dist = DistancesOverTheBatchEdges(batch, 0);
        const std::vector<int64_t> own(batch.node_dist.begin(), batch.node_dist.end());
        EXPECT_EQ(own, dist) << "source " << source;
        // Breadth-first order, every node within the model's reach.
        EXPECT_TRUE(std::is_sorted(own.begin(), own.end()));
        EXPECT_LE(own.back(), radius < 0 ? 3 : radius);
        // No entity twice.
        std::vector<int64_t> entities = batch.node_entity;
        std::sort(entities.begin(), entities.end());
        EXPECT_EQ(std::adjacent_find(entities.begin(), entities.end()), entities.end());
      }
    }
  }
  EXPECT_EQ(pruned, 3 * 2 * 5);  // every ball of this graph passes these budgets
}

TEST(PrunedPropagationTest, ANeighbourhoodWithinTheBudgetIsExactlyTheUnprunedOne) {
  const StaticGraph graph = HubGraph(3000, 7);
  PathBatchBuilder builder;
  int compared = 0;
  for (EntityId source = 2000; source < 2100; ++source) {
    PathBatch exact, within;
    ASSERT_TRUE(builder.Add(Spec(graph, 1, {}), {source, 2}, &exact).ok());
    ASSERT_TRUE(
        builder.Add(Spec(graph, 1, {exact.num_nodes(), exact.num_edges()}), {source, 2}, &within)
            .ok());
    EXPECT_EQ(within.query_pruned, std::vector<int64_t>{0});
    EXPECT_EQ(within.node_entity, exact.node_entity);
    EXPECT_EQ(within.node_dist, exact.node_dist);
    EXPECT_EQ(within.edge_src, exact.edge_src);
    EXPECT_EQ(within.edge_dst, exact.edge_dst);
    EXPECT_EQ(within.edge_relation, exact.edge_relation);
    // One node or one edge fewer than the ball prunes it.
    PathBatch smaller;
    ASSERT_TRUE(
        builder.Add(Spec(graph, 1, {exact.num_nodes() - 1, 0}), {source, 2}, &smaller).ok());
    EXPECT_EQ(smaller.query_pruned, std::vector<int64_t>{1});
    PathBatch fewer_edges;
    ASSERT_TRUE(builder
                    .Add(Spec(graph, 1, {exact.num_nodes(), exact.num_edges() - 2}), {source, 2},
                         &fewer_edges)
                    .ok());
    EXPECT_EQ(fewer_edges.query_pruned, std::vector<int64_t>{1});
    EXPECT_LE(fewer_edges.num_edges(), exact.num_edges() - 2);
    ++compared;
  }
  EXPECT_EQ(compared, 100);
}

TEST(PrunedPropagationTest, TheBudgetGoesToTheEntitiesMostWalksReachAndToTargetsFirst) {
  // Source 0 with leaves 1..40; entity 100 is a neighbour of leaves 1, 2 and 3, entity 101 of
  // leaf 4 only, entities 102..139 of one leaf each (leaves 5..40, then 5 and 6 again).
  std::vector<Triple> triples;
  for (uint32_t leaf = 1; leaf <= 40; ++leaf) triples.push_back({0, 0, leaf});
  for (uint32_t leaf : {1u, 2u, 3u}) triples.push_back({leaf, 1, 100});
  triples.push_back({4, 1, 101});
  for (uint32_t i = 0; i < 38; ++i) triples.push_back({5 + (i % 36), 1, 102 + i});
  const StaticGraph graph(140, triples);
  PathBatchBuilder builder;
  // Radius 2, 42 nodes: the source, then half the rest rounded up (21) at hop 1 of the 40
  // leaves (all equal: the lowest ids), then 20 of what 1..21 reach and of the leaves left:
  // 100 (3/80 of the walks) before the leaves (1/40 each) before 101 and 102.. (1/80).
  PathBatch batch;
  ASSERT_TRUE(builder.Add(Spec(graph, 2, {42, 0}), {0, 0}, &batch).ok());
  ASSERT_EQ(batch.query_pruned[0], 1);
  const std::vector<int64_t>& entities = batch.node_entity;
  EXPECT_THAT(entities, Contains(100));  // three walks reach it
  EXPECT_EQ(batch.node_dist[std::find(entities.begin(), entities.end(), 100) - entities.begin()],
            2);
  EXPECT_THAT(entities, Contains(21));
  EXPECT_THAT(entities, Contains(40));
  EXPECT_THAT(entities, Not(Contains(101)));  // reached from leaf 4 only, like 102..
  // A target is taken the moment a walk reaches it: 37 at hop 1 (with 1, 2, 3), but 101 only
  // through leaf 4, which hop 1 left out.
  PathBatch targeted;
  ASSERT_TRUE(builder
                  .Add(Spec(graph, 2, {8, 0}),
                       {0, 0, {}, std::nullopt, std::vector<EntityId>{101, 37}}, &targeted)
                  .ok());
  EXPECT_THAT(targeted.node_entity, Contains(37));
  EXPECT_THAT(targeted.node_entity, Not(Contains(101)));  // its leaf (4) was not chosen
  PathBatch reachable;
  ASSERT_TRUE(builder
                  .Add(Spec(graph, 2, {10, 0}),
                       {0, 0, {}, std::nullopt, std::vector<EntityId>{4, 101}}, &reachable)
                  .ok());
  EXPECT_THAT(reachable.node_entity, Contains(4));
  EXPECT_THAT(reachable.node_entity, Contains(101));
}

TEST(PrunedPropagationTest, ABatchPrunesEachQueryOnItsOwnAndMarksWhichWerePruned) {
  const StaticGraph graph = HubGraph(3000, 11);
  PathNeighbourhoodSpec spec = Spec(graph, 3, {120, 0});
  spec.layout = PathLayout::kCheaper;
  PathBatchBuilder builder;
  // A hub's ball passes 120 nodes; an isolated entity's (3000, beyond the ring) is itself.
  const StaticGraph with_isolated(3001, [&] {
    std::vector<Triple> t;
    for (EntityId e = 0; e < graph.num_entities(); ++e) {
      for (const Neighbor& n : graph.OutEdges(e)) t.push_back({e, n.relation, n.entity});
    }
    return t;
  }());
  spec.graph = &with_isolated;
  PathBatch batch;
  const std::vector<PathQuery> queries = {{0, 1}, {3000, 1}, {3, 2}};
  ASSERT_TRUE(builder.Build(spec, queries, &batch).ok());
  EXPECT_THAT(batch.query_pruned, ElementsAre(1, 0, 1));
  for (int64_t q = 0; q < batch.num_queries(); ++q) {
    EXPECT_LE(batch.node_begin[q + 1] - batch.node_begin[q], 120);
  }
}

// HubGraph with two hubs of 40,000 facts each beside it, joined to each other and to some of
// its entities: their lists are far longer than what a pruned pass keeps.
StaticGraph BigHubGraph() {
  constexpr uint32_t kBase = 3000, kLeaves = 40000;
  const StaticGraph base = HubGraph(kBase, 7);
  std::vector<Triple> triples;
  for (EntityId e = 0; e < base.num_entities(); ++e) {
    for (const Neighbor& n : base.OutEdges(e)) triples.push_back({e, n.relation, n.entity});
  }
  const EntityId hub_a = kBase, hub_b = kBase + 1, leaf0 = kBase + 2;
  for (uint32_t i = 0; i < kLeaves; ++i) {
    triples.push_back({hub_a, i % 4, leaf0 + i});
    triples.push_back({leaf0 + (i * 7919) % kLeaves, (i + 1) % 4, hub_b});
  }
  for (RelationId r = 0; r < 4; ++r) triples.push_back({hub_a, r, hub_b});
  for (EntityId e = 0; e < 40; ++e) {
    triples.push_back({hub_a, 1, e});
    triples.push_back({e * 3, 2, hub_b});
  }
  return StaticGraph(leaf0 + kLeaves, triples);
}

// The message edges a batch of `entities` (its nodes, in order) holds when every fact among
// them is read from its head's whole list: for each node, its out-facts to the others in
// (entity, relation) order, forwards then inverse.
struct Edges {
  std::vector<int64_t> src, dst, relation;
};
Edges EveryFactAmong(const GraphView& graph, const std::vector<int64_t>& entities, int64_t offset) {
  absl::flat_hash_map<EntityId, int64_t> local;
  for (size_t i = 0; i < entities.size(); ++i) local[static_cast<EntityId>(entities[i])] = i;
  Edges edges;
  for (size_t i = 0; i < entities.size(); ++i) {
    for (const Neighbor& n : graph.OutEdges(static_cast<EntityId>(entities[i]))) {
      const auto it = local.find(n.entity);
      if (it == local.end()) continue;
      const int64_t a = offset + static_cast<int64_t>(i), b = offset + it->second;
      edges.src.insert(edges.src.end(), {a, b});
      edges.dst.insert(edges.dst.end(), {b, a});
      edges.relation.insert(edges.relation.end(), {n.relation, n.relation + 4});
    }
  }
  return edges;
}

// A pruned pass that chooses a hub reads the hub's facts to the entities it keeps, not its
// whole list (ForEachFactAmong); the graph it propagates over is still every fact among them,
// in the order reading the lists whole gives, disjoint or shared.
TEST(PrunedPropagationTest, APassThroughAHubHoldsEveryFactAmongItsEntitiesInTheListsOrder) {
  const StaticGraph graph = BigHubGraph();
  PathBatchBuilder builder;
  int hub_passes = 0;
  for (const PathBudget budget : {PathBudget{64, 0}, PathBudget{300, 2000}}) {
    for (const int radius : {3, -1}) {
      for (EntityId source : {3000u, 3001u, 0u, 9u, 3002u, 20000u}) {
        PathBatch batch;
        ASSERT_TRUE(builder.Add(Spec(graph, radius, budget), {source, 1}, &batch).ok());
        EXPECT_EQ(batch.query_pruned, std::vector<int64_t>{1});
        const Edges expected = EveryFactAmong(graph, batch.node_entity, 0);
        EXPECT_EQ(batch.edge_src, expected.src) << "source " << source;
        EXPECT_EQ(batch.edge_dst, expected.dst) << "source " << source;
        EXPECT_EQ(batch.edge_relation, expected.relation) << "source " << source;
        EXPECT_EQ(std::vector<int64_t>(batch.node_dist.begin(), batch.node_dist.end()),
                  DistancesOverTheBatchEdges(batch, 0));
        if (budget.edges > 0) {
          EXPECT_LE(batch.num_edges(), budget.edges);
        }
        const bool through_hub =
            std::count(batch.node_entity.begin(), batch.node_entity.end(), 3000) +
                std::count(batch.node_entity.begin(), batch.node_entity.end(), 3001) >
            0;
        hub_passes += through_hub;
        // A hub's pass, and its leaves' (whose only neighbours are the hubs), hold a hub.
        if (source >= 3000) EXPECT_TRUE(through_hub) << "source " << source;
      }
    }
  }
  EXPECT_GE(hub_passes, 2 * 2 * 4);

  PathNeighbourhoodSpec spec = Spec(graph, 3, {64, 0});
  spec.layout = PathLayout::kShared;
  PathBatch shared;
  ASSERT_TRUE(builder.Build(spec, {{3000, 1}, {3002, 2}, {0, 3}}, &shared).ok());
  ASSERT_EQ(shared.columns, 3);
  const Edges expected = EveryFactAmong(graph, shared.shared_entity, 0);
  EXPECT_EQ(shared.edge_src, expected.src);
  EXPECT_EQ(shared.edge_dst, expected.dst);
  EXPECT_EQ(shared.edge_relation, expected.relation);
}

TEST(PrunedPropagationTest, WithoutABudgetAPassingNeighbourhoodIsStillRefused) {
  const StaticGraph graph = HubGraph(3000, 7);
  PathNeighbourhoodSpec spec = Spec(graph, 3, {});
  spec.max_nodes = 100;
  PathBatchBuilder builder;
  PathBatch batch;
  EXPECT_EQ(builder.Add(spec, {0, 1}, &batch).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(batch.num_queries(), 0);
}

}  // namespace
}  // namespace grail
