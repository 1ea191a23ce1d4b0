// GraIL's ranking of every entity offline (eval/grail_ranking.h): the entities near the source
// on their own subgraphs, the rest sharing one, and the filtered full ranking over them.
#include "eval/grail_ranking.h"

#include <cmath>
#include <vector>

#include "common/seeded_random.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "gtest/gtest.h"
#include "tests/testing/grail_own_scores.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

const std::vector<std::string> kRelations = {"r0", "r1", "r2"};

// 40 entities: random facts among 0..29, a self-loop on 4, 30..39 isolated.
StaticGraph Graph() {
  SeededRandom random(3);
  std::vector<Triple> facts;
  for (int i = 0; i < 45; ++i) {
    const uint32_t h = static_cast<uint32_t>(random.Uniform(30));
    const uint32_t t = static_cast<uint32_t>(random.Uniform(30));
    if (h != t) facts.push_back({h, static_cast<uint32_t>(random.Uniform(3)), t});
  }
  facts.push_back({4, 1, 4});
  return StaticGraph(40, facts);
}

std::unique_ptr<GrailModel> Model(int hops) {
  GrailConfig c;
  c.hops = hops;
  c.num_layers = 2;
  c.dim = 8;
  c.relation_dim = 8;
  absl::StatusOr<std::unique_ptr<GrailModel>> m = GrailModel::Create(c, kRelations, 11);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

TEST(GrailRankingTest, EveryEntityScoresAsItsOwnSubgraphWouldAndOnlyFarOnesShare) {
  const StaticGraph graph = Graph();
  for (const int hops : {1, 2}) {
    std::unique_ptr<GrailModel> model = Model(hops);
    const int32_t R = static_cast<int32_t>(graph.num_relations());
    const std::vector<RankingQuery> queries = {{0, 0}, {5, 1 + R}, {33, 2}, {4, 1}, {12, 2 + R}};
    GrailScoringOptions options;
    options.threads = 2;
    size_t read = 0, far = 0;
    ASSERT_TRUE(RunGrailQueries(*model, graph, RelationMap(), kRelations, queries, options,
                                [&](size_t i, const GrailQueryScores& s) {
                                  EXPECT_EQ(i, read++);
                                  const bool heads = queries[i].relation >= R;
                                  const uint32_t r = queries[i].relation - (heads ? R : 0);
                                  const std::vector<float> own = GrailOwnScores(
                                      *model, graph, RelationMap(), queries[i].source, r, heads);
                                  EXPECT_TRUE(std::is_sorted(s.near.begin(), s.near.end()));
                                  for (EntityId e = 0; e < graph.num_entities(); ++e) {
                                    if (e == queries[i].source) continue;
                                    auto it = std::lower_bound(s.near.begin(), s.near.end(), e);
                                    const bool near = it != s.near.end() && *it == e;
                                    far += near ? 0 : 1;
                                    const float got = near ? s.score[it - s.near.begin()] : s.far;
                                    EXPECT_NEAR(got, own[e], 1e-5) << hops << " " << i << " " << e;
                                  }
                                })
                    .ok());
    EXPECT_EQ(read, queries.size());
    EXPECT_GE(far, 10 * queries.size());  // the isolated entities at least
  }
}

TEST(GrailRankingTest, TheFullRankingIsTheFilteredRankAmongEveryEntitysOwnScore) {
  const StaticGraph graph = Graph();
  std::unique_ptr<GrailModel> model = Model(1);
  std::vector<Triple> test;
  SeededRandom random(8);
  while (test.size() < 10) {
    const uint32_t h = static_cast<uint32_t>(random.Uniform(32));
    const uint32_t t = static_cast<uint32_t>(random.Uniform(32));
    const uint32_t r = static_cast<uint32_t>(random.Uniform(3));
    if (h != t && !graph.HasFact(h, r, t)) test.push_back({h, r, t});
  }
  absl::StatusOr<EvaluationResult> result = EvaluateGrailFullRanking(
      *model, graph, RelationMap(), kRelations, test, {}, GrailScoringOptions());
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->full.has_value());
  // Each answer's rank among every candidate but the source and the other known answers,
  // ties at the mean.
  auto known = [&](EntityId h, uint32_t r, EntityId t) {
    if (graph.HasFact(h, r, t)) return true;
    for (const Triple& f : test) {
      if (f.head == h && f.relation == r && f.tail == t) return true;
    }
    return false;
  };
  double sum = 0;
  for (const Triple& f : test) {
    for (const bool heads : {false, true}) {
      const EntityId source = heads ? f.tail : f.head, answer = heads ? f.head : f.tail;
      const std::vector<float> own =
          GrailOwnScores(*model, graph, RelationMap(), source, f.relation, heads);
      double rank = 1;
      for (EntityId e = 0; e < graph.num_entities(); ++e) {
        if (e == source || e == answer) continue;
        if (heads ? known(e, f.relation, source) : known(source, f.relation, e)) continue;
        if (own[e] > own[answer] + 1e-6) {
          rank += 1;
        } else if (std::fabs(own[e] - own[answer]) <= 1e-6) {
          rank += 0.5;
        }
      }
      sum += 1 / rank;
    }
  }
  EXPECT_NEAR(result->full->mrr, sum / (2 * test.size()), 1e-9);
}

TEST(GrailRankingTest, ARelationTheModelDoesNotKnowIsRefusedNamingIt) {
  const StaticGraph graph = Graph();
  std::unique_ptr<GrailModel> model = Model(1);
  const RelationMap only_two({0, 1, -1});
  absl::Status s = RunGrailQueries(*model, graph, only_two, kRelations, {{0, 2}},
                                   GrailScoringOptions(), [](size_t, const GrailQueryScores&) {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("r2"));
}

}  // namespace
}  // namespace grail
