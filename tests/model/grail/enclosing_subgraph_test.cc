#include "model/grail/enclosing_subgraph.h"

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "tests/testing/reference_extraction.h"
#include "tests/testing/subgraph_expectations.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;
using ::testing::UnorderedElementsAreArray;

constexpr int kFar = kFarDistance;

// A small named graph and the readable outcome of extracting from it.
struct Drawn {
  explicit Drawn(const std::vector<NamedTriple>& facts) {
    IndexTriples(facts, &indexed);
    graph = StaticGraph(indexed.entities.size(), indexed.triples);
  }

  EntityId Id(const std::string& name) const { return *indexed.entities.Find(name); }
  RelationId Rel(const std::string& name) {
    return indexed.relations.Intern(name);  // target relations may be new
  }

  // Extracts (h, r, t); returns node name -> (du, dv) and edges as "h r t" strings.
  absl::Status Extract(const std::string& h, const std::string& r, const std::string& t,
                       ExtractionConfig config, bool hide = false) {
    SubgraphExtractor extractor(config);
    absl::Status status = extractor.Extract(graph, Id(h), Rel(r), Id(t), hide, &subgraph);
    if (!status.ok()) return status;
    labels.clear();
    edges.clear();
    for (int i = 0; i < subgraph.num_nodes(); ++i) {
      labels[indexed.entities.Name(subgraph.nodes[i])] = {subgraph.dist_u[i], subgraph.dist_v[i]};
    }
    for (int k = 0; k < subgraph.num_edges(); ++k) {
      edges.push_back(absl::StrCat(indexed.entities.Name(subgraph.nodes[subgraph.edge_src[k]]), " ",
                                   indexed.relations.Name(subgraph.edge_relation[k]), " ",
                                   indexed.entities.Name(subgraph.nodes[subgraph.edge_dst[k]])));
    }
    return absl::OkStatus();
  }

  IndexedTriples indexed;
  StaticGraph graph;
  EnclosingSubgraph subgraph;
  std::map<std::string, std::pair<int, int>> labels;
  std::vector<std::string> edges;
};

ExtractionConfig Hops(int k) {
  ExtractionConfig c;
  c.hops = k;
  return c;
}

// u -> a -> b -> v
const std::vector<NamedTriple> kPath = {{"u", "r", "a"}, {"a", "r", "b"}, {"b", "r", "v"}};

TEST(EnclosingSubgraphTest, PathIsLabelledByDistancesToBothEnds) {
  Drawn d(kPath);
  ASSERT_TRUE(d.Extract("u", "t", "v", Hops(3)).ok());
  EXPECT_THAT(d.labels, UnorderedElementsAre(Pair("u", Pair(0, 1)), Pair("v", Pair(1, 0)),
                                             Pair("a", Pair(1, 2)), Pair("b", Pair(2, 1))));
  EXPECT_THAT(d.edges, UnorderedElementsAre("u r a", "a r b", "b r v", "u t v"));
  EXPECT_EQ(d.subgraph.nodes[0], d.Id("u"));
  EXPECT_EQ(d.subgraph.nodes[1], d.Id("v"));
  EXPECT_FALSE(d.subgraph.target_in_graph);
  EXPECT_EQ(d.edges[d.subgraph.target_edge], "u t v");
}

TEST(EnclosingSubgraphTest, ExtractionDropsNodesFartherThanK) {
  Drawn d(kPath);
  // With k = 1 the 1-hop neighbourhoods {a} and {b} do not meet: only the targets remain.
  ASSERT_TRUE(d.Extract("u", "t", "v", Hops(1)).ok());
  EXPECT_THAT(d.labels, UnorderedElementsAre(Pair("u", Pair(0, 1)), Pair("v", Pair(1, 0))));
  EXPECT_THAT(d.edges, ElementsAre("u t v"));
}

TEST(EnclosingSubgraphTest, DiamondKeepsBothPathsAndASideNodeWithinReach) {
  // Two 2-paths u->a->v and u->b->v; c hangs off a, e hangs off c (3 from both ends).
  Drawn d({{"u", "p", "a"},
           {"a", "q", "v"},
           {"u", "p", "b"},
           {"b", "q", "v"},
           {"a", "s", "c"},
           {"c", "s", "e"}});
  ASSERT_TRUE(d.Extract("u", "t", "v", Hops(2)).ok());
  EXPECT_THAT(d.labels, UnorderedElementsAre(Pair("u", Pair(0, 1)), Pair("v", Pair(1, 0)),
                                             Pair("a", Pair(1, 1)), Pair("b", Pair(1, 1)),
                                             Pair("c", Pair(2, 2))));
  EXPECT_THAT(d.edges, UnorderedElementsAre("u p a", "a q v", "u p b", "b q v", "a s c", "u t v"));
  ASSERT_TRUE(d.Extract("u", "t", "v", Hops(3)).ok());
  EXPECT_EQ(d.labels.at("e"), std::pair(3, 3));
}

TEST(EnclosingSubgraphTest, NodeReachableOnlyThroughTheOtherTargetIsDropped) {
  // u -r-> v -s-> w: w is within 2 hops of u, but only through v.
  Drawn d({{"u", "r", "v"}, {"v", "s", "w"}});
  ASSERT_TRUE(d.Extract("u", "r", "v", Hops(2)).ok());
  EXPECT_THAT(d.labels, UnorderedElementsAre(Pair("u", Pair(0, 1)), Pair("v", Pair(1, 0))));
  EXPECT_THAT(d.edges, ElementsAre("u r v"));
}

TEST(EnclosingSubgraphTest, DistanceToTailIgnoresPathsThroughHead) {
  // a is next to u; with u removed its shortest way to v is a-c-d-v (3), not a-u-v (2).
  Drawn d({{"u", "r", "v"}, {"a", "r", "u"}, {"a", "r", "c"}, {"c", "r", "d"}, {"d", "r", "v"}});
  ASSERT_TRUE(d.Extract("u", "r", "v", Hops(3)).ok());
  EXPECT_EQ(d.labels.at("a"), std::pair(1, 3));
  EXPECT_EQ(d.labels.at("d"), std::pair(3, 1));
  // With k = 2, a (dv = 3) and d (du = 3) are pruned although both are within 2 hops of
  // u and v in the whole graph; c (2, 2) stays but loses its links to the pruned nodes.
  ASSERT_TRUE(d.Extract("u", "r", "v", Hops(2)).ok());
  EXPECT_FALSE(d.labels.count("a"));
  EXPECT_FALSE(d.labels.count("d"));
}

TEST(EnclosingSubgraphTest, TargetEdgeAlreadyInGraphIsNotDuplicated) {
  Drawn d({{"u", "r", "v"}, {"u", "s", "a"}, {"a", "s", "v"}});
  ASSERT_TRUE(d.Extract("u", "r", "v", Hops(2)).ok());
  EXPECT_TRUE(d.subgraph.target_in_graph);
  EXPECT_THAT(d.edges, UnorderedElementsAre("u r v", "u s a", "a s v"));
  EXPECT_EQ(d.edges[d.subgraph.target_edge], "u r v");
  // Another relation between the same pair is a different fact: the target is added.
  ASSERT_TRUE(d.Extract("u", "s", "v", Hops(2)).ok());
  EXPECT_FALSE(d.subgraph.target_in_graph);
  EXPECT_THAT(d.edges, UnorderedElementsAre("u r v", "u s a", "a s v", "u s v"));
}

TEST(EnclosingSubgraphTest, ReverseDirectionFactIsNotTheTarget) {
  Drawn d({{"v", "r", "u"}});
  ASSERT_TRUE(d.Extract("u", "r", "v", Hops(1)).ok());
  EXPECT_FALSE(d.subgraph.target_in_graph);
  EXPECT_THAT(d.edges, UnorderedElementsAre("v r u", "u r v"));
}

TEST(EnclosingSubgraphTest, HiddenTargetFactIsInvisibleToExtraction) {
  // The only link from u towards w is the target fact itself: u -r-> v -s-> w, w -s-> u.
  Drawn d({{"u", "r", "v"}, {"u", "x", "v"}, {"v", "s", "w"}, {"w", "s", "u"}});
  ASSERT_TRUE(d.Extract("u", "r", "v", Hops(1), /*hide=*/true).ok());
  EXPECT_FALSE(d.subgraph.target_in_graph);
  // The same pair under another relation stays; the target comes back exactly once.
  EXPECT_THAT(d.edges, UnorderedElementsAre("u x v", "v s w", "w s u", "u r v"));
  EXPECT_EQ(d.edges[d.subgraph.target_edge], "u r v");
  EXPECT_EQ(std::count(d.edges.begin(), d.edges.end(), "u r v"), 1);

  // When the target fact is the only path, hiding it disconnects the pair.
  Drawn only({{"u", "r", "v"}, {"v", "s", "w"}});
  ASSERT_TRUE(only.Extract("u", "r", "v", Hops(2), /*hide=*/false).ok());
  EXPECT_TRUE(only.subgraph.target_in_graph);
  ASSERT_TRUE(only.Extract("u", "r", "v", Hops(2), /*hide=*/true).ok());
  EXPECT_FALSE(only.subgraph.target_in_graph);
  EXPECT_THAT(only.edges, ElementsAre("u r v"));
}

TEST(EnclosingSubgraphTest, HeadEqualToTailIsRejected) {
  Drawn d(kPath);
  absl::Status status = d.Extract("u", "r", "u", Hops(3));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
}

TEST(EnclosingSubgraphTest, EntityOutsideTheGraphIsRejected) {
  Drawn d(kPath);
  SubgraphExtractor extractor(Hops(3));
  EnclosingSubgraph out;
  absl::Status status = extractor.Extract(d.graph, d.Id("u"), 0, 99, false, &out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), ::testing::HasSubstr("99"));
}

TEST(EnclosingSubgraphTest, HubNeighbourhoodIsCappedDeterministically) {
  // u and v share 200 common neighbours: u -> x_i -> v.
  std::vector<NamedTriple> facts;
  for (int i = 0; i < 200; ++i) {
    facts.push_back({"u", "r", absl::StrCat("x", i)});
    facts.push_back({absl::StrCat("x", i), "r", "v"});
  }
  Drawn d(facts);
  ASSERT_TRUE(d.Extract("u", "t", "v", Hops(2)).ok());
  EXPECT_EQ(d.subgraph.num_nodes(), 202);

  ExtractionConfig capped = Hops(2);
  capped.max_nodes_per_hop = 10;
  ASSERT_TRUE(d.Extract("u", "t", "v", capped).ok());
  const std::map<std::string, std::pair<int, int>> first = d.labels;
  const std::vector<std::string> first_edges = d.edges;
  // Each side keeps at most 10 of the 200 at hop 1, so at most 10 common neighbours.
  EXPECT_LE(d.subgraph.num_nodes(), 2 + 10);
  EXPECT_GE(d.subgraph.num_nodes(), 2);
  ASSERT_TRUE(d.Extract("u", "t", "v", capped).ok());
  EXPECT_EQ(d.labels, first);
  EXPECT_EQ(d.edges, first_edges);
}

TEST(EnclosingSubgraphTest, CapLimitsEachHopOfALargeNeighbourhood) {
  // A star around u with 500 leaves, one of which leads to v.
  std::vector<NamedTriple> facts;
  for (int i = 0; i < 500; ++i) facts.push_back({"u", "r", absl::StrCat("x", i)});
  facts.push_back({"x0", "r", "v"});
  Drawn d(facts);
  ExtractionConfig union_capped = Hops(1);
  union_capped.enclosing = false;
  union_capped.max_nodes_per_hop = 7;
  ASSERT_TRUE(d.Extract("u", "t", "v", union_capped).ok());
  // u's 1-hop sample is 7 leaves; v's is its single neighbour x0 (maybe among them).
  EXPECT_GE(d.subgraph.num_nodes(), 2 + 7);
  EXPECT_LE(d.subgraph.num_nodes(), 2 + 7 + 1);
}

TEST(EnclosingSubgraphTest, NoEnclosingAblationKeepsTheUnionAndMarksFarNodes) {
  // Path u-a-b-v plus a leaf x on u; k = 1.
  std::vector<NamedTriple> facts = kPath;
  facts.push_back({"u", "r", "x"});
  Drawn d(facts);
  ExtractionConfig config = Hops(1);
  config.enclosing = false;
  ASSERT_TRUE(d.Extract("u", "t", "v", config).ok());
  EXPECT_THAT(d.labels, UnorderedElementsAre(Pair("u", Pair(0, 1)), Pair("v", Pair(1, 0)),
                                             Pair("a", Pair(1, kFar)), Pair("x", Pair(1, kFar)),
                                             Pair("b", Pair(kFar, 1))));
  EXPECT_THAT(d.edges, UnorderedElementsAre("u r a", "a r b", "b r v", "u r x", "u t v"));
}

TEST(EnclosingSubgraphTest, ExtractorIsReusableAcrossGraphsOfDifferentSizes) {
  Drawn small(kPath);
  std::vector<NamedTriple> facts;
  for (int i = 0; i < 1000; ++i) facts.push_back({absl::StrCat("n", i), "r", "hub"});
  facts.push_back({"n0", "r", "n1"});
  Drawn large(facts);
  SubgraphExtractor extractor(Hops(2));
  EnclosingSubgraph out;
  ASSERT_TRUE(extractor.Extract(small.graph, small.Id("u"), 0, small.Id("v"), false, &out).ok());
  EXPECT_EQ(out.num_nodes(), 4);
  ASSERT_TRUE(extractor.Extract(large.graph, large.Id("n0"), 0, large.Id("n1"), false, &out).ok());
  EXPECT_EQ(out.num_nodes(), 1000 + 1);  // every n_i is 2 hops from both through the hub
  ASSERT_TRUE(extractor.Extract(small.graph, small.Id("u"), 0, small.Id("v"), false, &out).ok());
  EXPECT_EQ(out.num_nodes(), 4);
}

// ---------------------------------------------------------------------------------------
// Property test: the extractor agrees with the plain, set-based reference implementation of
// the definition on many random graphs.

TEST(EnclosingSubgraphPropertyTest, MatchesPlainBfsOracleOnRandomGraphs) {
  SeededRandom rng(20261122);
  SubgraphExtractor enclosing_extractor(Hops(3));
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const uint32_t n = 5 + static_cast<uint32_t>(rng.Uniform(60));
    const uint32_t m = static_cast<uint32_t>(rng.Uniform(3 * n));
    const uint32_t relations = 1 + static_cast<uint32_t>(rng.Uniform(4));
    std::vector<Triple> facts;
    for (uint32_t i = 0; i < m; ++i) {
      facts.push_back({static_cast<EntityId>(rng.Uniform(n)),
                       static_cast<RelationId>(rng.Uniform(relations)),
                       static_cast<EntityId>(rng.Uniform(n))});
    }
    StaticGraph graph(n, facts);
    const int k = 1 + static_cast<int>(rng.Uniform(4));
    const bool enclosing = rng.Uniform(3) != 0;
    ExtractionConfig config = Hops(k);
    config.enclosing = enclosing;
    SubgraphExtractor extractor(config);
    for (int q = 0; q < 5; ++q) {
      EntityId u = static_cast<EntityId>(rng.Uniform(n));
      EntityId v = static_cast<EntityId>(rng.Uniform(n));
      if (u == v) continue;
      RelationId r = static_cast<RelationId>(rng.Uniform(relations));
      if (!facts.empty() && rng.Uniform(2) == 0) {  // often score an existing fact
        const Triple& t = facts[rng.Uniform(facts.size())];
        if (t.head == t.tail) continue;
        std::tie(u, r, v) = std::tuple(t.head, t.relation, t.tail);
      }
      EnclosingSubgraph out;
      ASSERT_TRUE(extractor.Extract(graph, u, r, v, false, &out).ok());
      ReferenceSubgraph expected = ReferenceExtract(graph, u, r, v, k, enclosing);

      std::map<EntityId, std::pair<int, int>> labels;
      for (int i = 0; i < out.num_nodes(); ++i) {
        labels[out.nodes[i]] = {out.dist_u[i], out.dist_v[i]};
      }
      std::multiset<std::tuple<EntityId, RelationId, EntityId>> edges;
      for (int e = 0; e < out.num_edges(); ++e) {
        edges.insert(
            {out.nodes[out.edge_src[e]], out.edge_relation[e], out.nodes[out.edge_dst[e]]});
      }
      SCOPED_TRACE(absl::StrCat("trial ", trial, " k=", k, " enclosing=", enclosing, " u=", u,
                                " r=", r, " v=", v));
      ASSERT_EQ(labels, expected.labels);
      ASSERT_EQ(edges, expected.edges);
      ASSERT_EQ(out.nodes[0], u);
      ASSERT_EQ(out.nodes[1], v);
      ++checked;
    }
  }
  EXPECT_GT(checked, 1000);
}

// ---------------------------------------------------------------------------------------
// Reusing one target's neighbourhood (ranking), and the radius beyond which every enclosing
// subgraph is trivial.

// A random multi-relational graph with a hub (entity 0) and several disconnected parts.
StaticGraph RandomGraphWithHub(SeededRandom& rng, uint32_t n, uint32_t* relations) {
  *relations = 1 + static_cast<uint32_t>(rng.Uniform(3));
  const uint32_t parts = 1 + static_cast<uint32_t>(rng.Uniform(3));
  std::vector<Triple> facts;
  const uint32_t m = static_cast<uint32_t>(rng.Uniform(2 * n));
  for (uint32_t i = 0; i < m; ++i) {
    const uint32_t part = static_cast<uint32_t>(rng.Uniform(parts));
    // Entities e with e % parts == part form one part; nothing joins two parts.
    auto pick = [&] {
      const uint32_t slots = (n - part + parts - 1) / parts;
      return static_cast<EntityId>(part + parts * rng.Uniform(slots));
    };
    facts.push_back({pick(), static_cast<RelationId>(rng.Uniform(*relations)), pick()});
  }
  for (EntityId e = parts; e < n; e += parts) {  // the hub of part 0
    if (rng.Uniform(2) == 0) facts.push_back({0, 0, e});
  }
  return StaticGraph(n, facts);
}

TEST(TargetNeighbourhoodTest, ExtractionWithTheFixedSideGivenIsIdentical) {
  SeededRandom rng(7);
  int checked = 0;
  for (int trial = 0; trial < 120; ++trial) {
    uint32_t relations = 0;
    const uint32_t n = 8 + static_cast<uint32_t>(rng.Uniform(80));
    const StaticGraph graph = RandomGraphWithHub(rng, n, &relations);
    ExtractionConfig config = Hops(1 + static_cast<int>(rng.Uniform(3)));
    config.max_nodes_per_hop = rng.Uniform(3) == 0 ? 1 + static_cast<int>(rng.Uniform(4)) : 0;
    config.enclosing = rng.Uniform(4) != 0;
    const EntityId fixed = rng.Uniform(3) == 0 ? 0 : static_cast<EntityId>(rng.Uniform(n));
    const TargetNeighbourhood neighbourhood = TargetNeighbourhood::Expand(graph, fixed, config);
    SubgraphExtractor plain(config), reusing(config);
    for (EntityId other = 0; other < n; ++other) {
      if (other == fixed) continue;
      const RelationId r = static_cast<RelationId>(rng.Uniform(relations));
      for (const bool fixed_is_head : {true, false}) {
        const EntityId head = fixed_is_head ? fixed : other;
        const EntityId tail = fixed_is_head ? other : fixed;
        EnclosingSubgraph expected, actual;
        ASSERT_TRUE(plain.Extract(graph, head, r, tail, false, &expected).ok());
        ASSERT_TRUE(reusing.Extract(graph, head, r, tail, neighbourhood, &actual).ok());
        SCOPED_TRACE(absl::StrCat("trial ", trial, " k=", config.hops, " cap=",
                                  config.max_nodes_per_hop, " (", head, ", ", r, ", ", tail, ")"));
        ExpectSameSubgraph(actual, expected);
        if (::testing::Test::HasFailure()) return;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 2000);
}

TEST(TargetNeighbourhoodTest, NodesFollowTheHeadsSearchOrder) {
  SeededRandom rng(8);
  for (int trial = 0; trial < 60; ++trial) {
    uint32_t relations = 0;
    const uint32_t n = 10 + static_cast<uint32_t>(rng.Uniform(60));
    const StaticGraph graph = RandomGraphWithHub(rng, n, &relations);
    ExtractionConfig config = Hops(1 + static_cast<int>(rng.Uniform(3)));
    SubgraphExtractor extractor(config);
    for (int q = 0; q < 10; ++q) {
      const EntityId u = static_cast<EntityId>(rng.Uniform(n));
      const EntityId v = static_cast<EntityId>(rng.Uniform(n));
      if (u == v) continue;
      const TargetNeighbourhood search = TargetNeighbourhood::Expand(graph, u, config);
      EnclosingSubgraph out;
      ASSERT_TRUE(extractor.Extract(graph, u, 0, v, false, &out).ok());
      for (int i = 3; i < out.num_nodes(); ++i) {
        EXPECT_LT(search.Position(out.nodes[i - 1]), search.Position(out.nodes[i]));
      }
    }
  }
}

TEST(TargetNeighbourhoodTest, ANeighbourhoodOfNeitherTargetIsRejected) {
  Drawn d(kPath);
  const TargetNeighbourhood of_a = TargetNeighbourhood::Expand(d.graph, d.Id("a"), Hops(2));
  SubgraphExtractor extractor(Hops(2));
  EnclosingSubgraph out;
  EXPECT_EQ(extractor.Extract(d.graph, d.Id("u"), 0, d.Id("v"), of_a, &out).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TrivialSubgraphTest, PairsAtDistanceKPlusTwoOrMoreKeepOnlyTheTargetsAndTheTargetEdge) {
  SeededRandom rng(9);
  int far_pairs = 0, nontrivial_at_k_plus_1 = 0;
  for (int trial = 0; trial < 150; ++trial) {
    uint32_t relations = 0;
    const uint32_t n = 8 + static_cast<uint32_t>(rng.Uniform(60));
    const StaticGraph graph = RandomGraphWithHub(rng, n, &relations);
    ExtractionConfig config = Hops(1 + static_cast<int>(rng.Uniform(3)));
    config.max_nodes_per_hop = rng.Uniform(3) == 0 ? 1 + static_cast<int>(rng.Uniform(3)) : 0;
    SubgraphExtractor extractor(config);
    const EntityId u = static_cast<EntityId>(rng.Uniform(n));
    const std::vector<int> dist = ReferenceDistances(graph, u);
    for (EntityId v = 0; v < n; ++v) {
      if (v == u) continue;
      EnclosingSubgraph out;
      ASSERT_TRUE(extractor.Extract(graph, u, 0, v, false, &out).ok());
      // Besides u and v and the target edge, only their self-loops (if any) may be left.
      bool trivial = out.num_nodes() == 2;
      for (int e = 0; e < out.num_edges(); ++e) {
        trivial &= e == out.target_edge || out.edge_src[e] == out.edge_dst[e];
      }
      if (dist[v] < 0 || dist[v] >= TrivialSubgraphDistance(config)) {
        EXPECT_TRUE(trivial) << "trial " << trial << ": d(" << u << ", " << v << ") = " << dist[v]
                             << ", k = " << config.hops;
        ++far_pairs;
      } else if (dist[v] == config.hops + 1 && !trivial) {
        ++nontrivial_at_k_plus_1;
      }
    }
  }
  EXPECT_GT(far_pairs, 500);
  // The bound is tight: one hop closer, subgraphs are not all trivial.
  EXPECT_GT(nontrivial_at_k_plus_1, 0);
}

TEST(TrivialSubgraphTest, EntitiesWithinHopsIsTheBallAndStopsAtItsLimit) {
  SeededRandom rng(10);
  for (int trial = 0; trial < 100; ++trial) {
    uint32_t relations = 0;
    const uint32_t n = 5 + static_cast<uint32_t>(rng.Uniform(80));
    const StaticGraph graph = RandomGraphWithHub(rng, n, &relations);
    const EntityId root = static_cast<EntityId>(rng.Uniform(n));
    const int hops = static_cast<int>(rng.Uniform(5));
    const std::vector<int> dist = ReferenceDistances(graph, root);
    std::vector<EntityId> expected;
    for (EntityId e = 0; e < n; ++e) {
      if (dist[e] >= 0 && dist[e] <= hops) expected.push_back(e);
    }
    const std::optional<std::vector<EntityId>> ball = EntitiesWithinHops(graph, root, hops, n);
    ASSERT_TRUE(ball.has_value());
    EXPECT_EQ(*ball, expected);
    EXPECT_TRUE(EntitiesWithinHops(graph, root, hops, expected.size()).has_value());
    EXPECT_FALSE(EntitiesWithinHops(graph, root, hops, expected.size() - 1).has_value());
  }
}

}  // namespace
}  // namespace grail
