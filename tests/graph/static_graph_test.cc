#include "graph/static_graph.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grail {
namespace {

using ::testing::ElementsAre;

TEST(StaticGraphTest, OutAndInEdgesAreSortedAndDeduplicated) {
  // 0 -1-> 2, 0 -0-> 2, 0 -0-> 1, repeated fact 0 -0-> 2, 3 -0-> 2.
  const std::vector<Triple> facts = {{0, 1, 2}, {0, 0, 2}, {0, 0, 1}, {0, 0, 2}, {3, 0, 2}};
  StaticGraph g(4, facts);
  EXPECT_EQ(g.num_entities(), 4u);
  EXPECT_EQ(g.num_relations(), 2u);
  EXPECT_EQ(g.num_facts(), 4u);
  EXPECT_THAT(g.OutEdges(0), ElementsAre(Neighbor{1, 0}, Neighbor{2, 0}, Neighbor{2, 1}));
  EXPECT_THAT(g.InEdges(2), ElementsAre(Neighbor{0, 0}, Neighbor{0, 1}, Neighbor{3, 0}));
  EXPECT_TRUE(g.OutEdges(1).empty());
  EXPECT_THAT(g.InEdges(1), ElementsAre(Neighbor{0, 0}));
  EXPECT_EQ(g.Degree(0), 3u);
  EXPECT_EQ(g.Degree(2), 3u);
}

TEST(StaticGraphTest, HasFactRespectsDirectionAndRelation) {
  StaticGraph g(3, std::vector<Triple>{{0, 4, 1}, {1, 2, 2}});
  EXPECT_TRUE(g.HasFact(0, 4, 1));
  EXPECT_FALSE(g.HasFact(1, 4, 0));
  EXPECT_FALSE(g.HasFact(0, 2, 1));
  EXPECT_TRUE(g.HasFact(1, 2, 2));
  EXPECT_FALSE(g.HasFact(7, 2, 2));
}

TEST(StaticGraphTest, SelfLoopEntitiesAreListedOnceInIdOrder) {
  StaticGraph g(5, std::vector<Triple>{{3, 0, 3}, {1, 0, 2}, {3, 1, 3}, {0, 2, 0}});
  EXPECT_THAT(g.SelfLoopEntities(), ElementsAre(0u, 3u));
}

TEST(StaticGraphTest, FactsListsEveryDistinctFactOnce) {
  const std::vector<Triple> facts = {{2, 0, 1}, {0, 0, 1}, {2, 0, 1}, {1, 3, 0}};
  StaticGraph g(3, facts);
  EXPECT_THAT(g.Facts(), ElementsAre(Triple{0, 0, 1}, Triple{1, 3, 0}, Triple{2, 0, 1}));
}

TEST(StaticGraphTest, EntitiesWithoutFactsHaveEmptyAdjacency) {
  StaticGraph g(5, std::vector<Triple>{{1, 0, 3}});
  for (EntityId e : {0u, 2u, 4u}) {
    EXPECT_TRUE(g.OutEdges(e).empty());
    EXPECT_TRUE(g.InEdges(e).empty());
  }
}

}  // namespace
}  // namespace grail
