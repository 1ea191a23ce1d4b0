#include "graph/negative_sampling.h"

#include <set>

#include "graph/static_graph.h"
#include "gtest/gtest.h"

namespace grail {
namespace {

// A star: 0 -0-> i for i = 1..9, plus 1 -0-> 2.
StaticGraph Star() {
  std::vector<Triple> facts;
  for (EntityId i = 1; i < 10; ++i) facts.push_back({0, 0, i});
  facts.push_back({1, 0, 2});
  return StaticGraph(10, facts);
}

TEST(NegativeSamplingTest, CorruptionIsNeverAFactASelfLoopOrTheFactItself) {
  StaticGraph g = Star();
  SeededRandom random(1);
  const Triple fact{1, 0, 2};
  int heads = 0;
  for (int i = 0; i < 2000; ++i) {
    std::optional<Triple> n = CorruptHeadOrTail(g, fact, random);
    ASSERT_TRUE(n.has_value());
    EXPECT_FALSE(g.HasFact(n->head, n->relation, n->tail));
    EXPECT_NE(n->head, n->tail);
    EXPECT_NE(*n, fact);
    EXPECT_EQ(n->relation, fact.relation);
    EXPECT_TRUE(n->head == fact.head || n->tail == fact.tail);
    heads += n->head != fact.head ? 1 : 0;
  }
  // Both sides get replaced (a fair coin, up to rejections).
  EXPECT_GT(heads, 400);
  EXPECT_LT(heads, 1600);
}

TEST(NegativeSamplingTest, ATestFactIsNeverItsOwnNegative) {
  // The held-out fact 3 -0-> 4 is not in the graph: replacing its tail with 4 must not
  // count as a negative, although the graph alone would allow it.
  StaticGraph g = Star();
  SeededRandom random(2);
  const Triple held_out{3, 0, 4};
  std::vector<EntityId> tails = SampleReplacements(g, held_out, Side::kTail, 100, random);
  for (EntityId t : tails) EXPECT_NE(t, 4u);
  EXPECT_EQ(tails.size(), 8u);  // every entity but 3 (self-loop) and 4 (the fact)
}

TEST(NegativeSamplingTest, ReplacementsAreDistinctValidAndDeterministicPerSeed) {
  StaticGraph g = Star();
  const Triple fact{0, 0, 1};
  SeededRandom a(7), b(7);
  std::vector<EntityId> first = SampleReplacements(g, fact, Side::kHead, 5, a);
  EXPECT_EQ(first, SampleReplacements(g, fact, Side::kHead, 5, b));
  EXPECT_EQ(first.size(), 5u);
  EXPECT_EQ(std::set<EntityId>(first.begin(), first.end()).size(), first.size());
  for (EntityId h : first) {
    EXPECT_TRUE(IsValidReplacement(g, fact, Side::kHead, h));
    EXPECT_FALSE(g.HasFact(h, 0, 1));
  }
}

TEST(NegativeSamplingTest, FewerReplacementsOnlyWhenFewerExist) {
  // 0 already points at every other entity: no tail of 0 can be corrupted.
  StaticGraph g = Star();
  SeededRandom random(3);
  EXPECT_TRUE(SampleReplacements(g, {0, 0, 1}, Side::kTail, 49, random).empty());
  EXPECT_FALSE(CorruptHeadOrTail(StaticGraph(2, std::vector<Triple>{{0, 0, 1}}), {0, 0, 1}, random)
                   .has_value());
}

TEST(NegativeSamplingTest, TheSourceIsANegativeOnlyWhenAskedAndNeverWhenItAnswers) {
  // The query (1, r0, ?) of the star: 2 answers it; the source 1 does not, unless a self-loop
  // (1, r0, 1) is a fact.
  auto draws = [](const StaticGraph& g, SourceNegative source_negative) {
    SeededRandom random(4);
    std::multiset<EntityId> drawn;
    for (int i = 0; i < 100; ++i) {
      for (EntityId e : SampleNonAnswers(g, 1, 0, false, 2, 20, random, source_negative)) {
        drawn.insert(e);
      }
    }
    return drawn;
  };
  const StaticGraph g = Star();
  const std::multiset<EntityId> never = draws(g, SourceNegative::kNever);
  const std::multiset<EntityId> unless = draws(g, SourceNegative::kUnlessAnswer);
  EXPECT_EQ(never.size(), 2000u);
  EXPECT_EQ(never.count(1), 0u);
  EXPECT_EQ(never.count(2), 0u);
  EXPECT_GT(unless.count(1), 100u);  // one entity in nine: ~222 of 2000
  EXPECT_EQ(unless.count(2), 0u);
  // The inverse query (?, r0, 1) of entity 1 too: 0 answers it, 1 may be drawn.
  SeededRandom random(5);
  std::multiset<EntityId> heads;
  for (int i = 0; i < 100; ++i) {
    for (EntityId e :
         SampleNonAnswers(g, 1, 0, true, 0, 20, random, SourceNegative::kUnlessAnswer)) {
      heads.insert(e);
    }
  }
  EXPECT_GT(heads.count(1), 100u);
  EXPECT_EQ(heads.count(0), 0u);

  std::vector<Triple> facts = g.Facts();
  facts.push_back({1, 0, 1});
  EXPECT_EQ(draws(StaticGraph(10, facts), SourceNegative::kUnlessAnswer).count(1), 0u);
}

}  // namespace
}  // namespace grail
