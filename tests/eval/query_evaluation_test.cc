#include "eval/query_evaluation.h"

#include <cmath>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "gtest/gtest.h"

namespace grail {
namespace {

using ::testing::DoubleEq;
using ::testing::HasSubstr;

constexpr int32_t kRelations = 2;
constexpr uint32_t kEntities = 12;

// A chain 0 -r0-> 1 -r0-> 2 ... (no entity has two answers for one query), and test facts
// (h, r1, h + 3), which are not in the graph.
StaticGraph Chain() {
  std::vector<Triple> facts;
  for (uint32_t e = 0; e + 1 < kEntities; ++e) facts.push_back({e, 0, e + 1});
  return StaticGraph(kEntities, facts);
}
std::vector<Triple> TestFacts() { return {{0, 1, 3}, {4, 1, 7}, {6, 1, 9}}; }

// A scorer that is not a model: `score(query, entity)` for every entity, each its own.
class FunctionScores final : public QueryScores {
 public:
  FunctionScores(RankingQuery query, std::function<float(RankingQuery, EntityId)> score)
      : query_(query), score_(std::move(score)) {}
  float Of(EntityId entity) const override { return score_(query_, entity); }
  bool HasOwn(EntityId) const override { return true; }
  void ForEachOwn(absl::FunctionRef<void(EntityId, float)> fn) const override {
    for (EntityId e = 0; e < kEntities; ++e) fn(e, Of(e));
  }
  int64_t NumOwn() const override { return kEntities; }
  float Rest() const override { return 0; }

 private:
  const RankingQuery query_;
  const std::function<float(RankingQuery, EntityId)> score_;
};

QueryRunner Runner(std::function<float(RankingQuery, EntityId)> score,
                   std::vector<RankingQuery>* asked = nullptr) {
  return [score, asked](absl::Span<const RankingQuery> queries,
                        const std::function<void(size_t, const QueryScores&)>& read) {
    for (size_t i = 0; i < queries.size(); ++i) {
      if (asked != nullptr) asked->push_back(queries[i]);
      read(i, FunctionScores(queries[i], score));
    }
    return absl::OkStatus();
  };
}

// The answer of each test query: t for (h, r, ?), h for the inverse (t, r^-1, ?).
float Oracle(RankingQuery q, EntityId e) {
  for (const Triple& t : TestFacts()) {
    if (q.relation == t.relation && q.source == t.head && e == t.tail) return 1;
    if (q.relation == t.relation + kRelations && q.source == t.tail && e == t.head) return 1;
  }
  return 0;
}

TEST(QueryEvaluationTest, AScorerThatKnowsTheAnswersRanksEveryTestFactFirst) {
  const StaticGraph graph = Chain();
  std::vector<RankingQuery> asked;
  absl::StatusOr<EvaluationResult> result =
      EvaluateRankingQueries(graph, RelationMap(), kRelations, TestFacts(),
                             RankingEvaluationOptions{}, Runner(Oracle, &asked));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->n, 3);
  EXPECT_THAT(result->mrr, DoubleEq(1));
  EXPECT_THAT(result->auc_pr, DoubleEq(1));
  ASSERT_TRUE(result->full.has_value());
  EXPECT_THAT(result->full->mrr, DoubleEq(1));
  EXPECT_THAT(result->full->hits_at_1, DoubleEq(1));
  // A tail query per fact and the inverse query of its head, at least.
  for (const Triple& t : TestFacts()) {
    EXPECT_THAT(asked, ::testing::Contains(::testing::AllOf(
                           ::testing::Field(&RankingQuery::source, t.head),
                           ::testing::Field(&RankingQuery::relation, t.relation))));
    EXPECT_THAT(asked, ::testing::Contains(::testing::AllOf(
                           ::testing::Field(&RankingQuery::source, t.tail),
                           ::testing::Field(&RankingQuery::relation, t.relation + kRelations))));
  }
}

TEST(QueryEvaluationTest, TiesRankAtTheMeanOfTheOptimisticAndPessimisticRank) {
  const StaticGraph graph = Chain();
  RankingEvaluationOptions options;
  options.sampled = false;
  absl::StatusOr<EvaluationResult> result =
      EvaluateRankingQueries(graph, RelationMap(), kRelations, TestFacts(), options,
                             Runner([](RankingQuery, EntityId) { return 0.5f; }));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->full.has_value());
  // Every candidate (each entity but the query's own) ties: the true one ranks
  // (1 + (kEntities - 1)) / 2 in both directions.
  EXPECT_THAT(result->full->mrr, DoubleEq(2.0 / kEntities));
  // One reciprocal rank a list, two lists a fact.
  EXPECT_THAT(result->full->reciprocal_ranks, ::testing::Each(DoubleEq(2.0 / kEntities)));
  EXPECT_EQ(result->full->reciprocal_ranks.size(), 2 * TestFacts().size());
  // Counted against the answer, as the published figures count them, with the source among
  // the candidates: every other entity ties, so the answer ranks last.
  EXPECT_THAT(result->full->strict_mrr, DoubleEq(1.0 / kEntities));
  EXPECT_THAT(result->full->strict_hits_at_10, DoubleEq(0));
}

TEST(QueryEvaluationTest, ADivergedScorersNanAnswerRanksBehindEveryScoredCandidate) {
  const StaticGraph graph = Chain();
  RankingEvaluationOptions options;
  options.sampled = false;
  // NaN for the answers, numbers for the rest: the answers rank last, not first.
  absl::StatusOr<EvaluationResult> result = EvaluateRankingQueries(
      graph, RelationMap(), kRelations, TestFacts(), options,
      Runner([](RankingQuery q, EntityId e) { return Oracle(q, e) == 1 ? std::nanf("") : 0.f; }));
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->full.has_value());
  // The kEntities - 2 other candidates (the source and the answer left out) score above.
  EXPECT_THAT(result->full->mrr, DoubleEq(1.0 / (kEntities - 1)));
}

TEST(QueryEvaluationTest, TheStrictRankCountsTheSourceUnlessItIsAKnownAnswer) {
  const StaticGraph graph = Chain();
  // The source outscores the answer, which outscores everything else.
  auto scorer = [](RankingQuery q, EntityId e) -> float {
    return e == q.source ? 2.0f : Oracle(q, e);
  };
  RankingEvaluationOptions options;
  options.sampled = false;
  absl::StatusOr<EvaluationResult> result = EvaluateRankingQueries(
      graph, RelationMap(), kRelations, TestFacts(), options, Runner(scorer));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->full->mrr, DoubleEq(1));  // the source is never a candidate there
  EXPECT_THAT(result->full->strict_mrr, DoubleEq(0.5));
  EXPECT_THAT(result->full->strict_hits_at_1, DoubleEq(0));
  EXPECT_THAT(result->full->strict_hits_at_10, DoubleEq(1));
  // (h, r1, h) known: the tail query's source is an answer and left out; the head query's
  // source (the tail) still counts.
  std::vector<Triple> known;
  for (const Triple& t : TestFacts()) known.push_back({t.head, t.relation, t.head});
  options.known_facts = known;
  result = EvaluateRankingQueries(graph, RelationMap(), kRelations, TestFacts(), options,
                                  Runner(scorer));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(result->full->strict_mrr, DoubleEq((1 + 0.5) / 2));
  EXPECT_THAT(result->full->strict_hits_at_1, DoubleEq(0.5));
}

TEST(QueryEvaluationTest, OtherKnownAnswersAreLeftOutOfTheFullRanking) {
  const StaticGraph graph = Chain();
  // Each query's other known answer is (h, r1, h + 4) (a `known_facts` fact), scored above
  // the test answer; filtered, the test answer still ranks first.
  std::vector<Triple> known;
  for (const Triple& t : TestFacts()) known.push_back({t.head, t.relation, t.tail + 1});
  auto scorer = [](RankingQuery q, EntityId e) -> float {
    for (const Triple& t : TestFacts()) {
      if (q.relation == t.relation && q.source == t.head) {
        return e == t.tail + 1 ? 2.0f : e == t.tail ? 1.0f : 0.0f;
      }
    }
    return Oracle(q, e);
  };
  RankingEvaluationOptions options;
  options.sampled = false;
  options.known_facts = known;
  absl::StatusOr<EvaluationResult> filtered = EvaluateRankingQueries(
      graph, RelationMap(), kRelations, TestFacts(), options, Runner(scorer));
  ASSERT_TRUE(filtered.ok()) << filtered.status();
  EXPECT_THAT(filtered->full->mrr, DoubleEq(1));
  options.known_facts = {};
  absl::StatusOr<EvaluationResult> unfiltered = EvaluateRankingQueries(
      graph, RelationMap(), kRelations, TestFacts(), options, Runner(scorer));
  ASSERT_TRUE(unfiltered.ok()) << unfiltered.status();
  EXPECT_THAT(unfiltered->full->mrr, DoubleEq((0.5 + 1) / 2));  // tails rank 2, heads 1
}

TEST(QueryEvaluationTest, AFactOfARelationTheModelDoesNotKnowIsRefused) {
  const StaticGraph graph = Chain();
  absl::StatusOr<EvaluationResult> result =
      EvaluateRankingQueries(graph, RelationMap{0, -1}, kRelations, TestFacts(),
                             RankingEvaluationOptions{}, Runner(Oracle));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace grail
