#include "model/grail/subgraph_batch.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grail {
namespace {

using ::testing::ElementsAre;

TEST(MapRelationsByNameTest, MatchesNamesWhateverTheIdOrder) {
  const std::vector<std::string> graph = {"hypernym", "unseen", "part_of", "also_see"};
  const std::vector<std::string> model = {"also_see", "hypernym", "part_of"};
  EXPECT_THAT(MapRelationsByName(graph, model), ElementsAre(1, -1, 2, 0));
}

TEST(MapRelationsByNameTest, EmptyGraphGivesEmptyMap) {
  EXPECT_TRUE(MapRelationsByName({}, std::vector<std::string>{"a"}).empty());
}

TEST(SubgraphBatchTest, DropsEdgesOfRelationsTheModelDoesNotKnow) {
  EnclosingSubgraph subgraph;
  subgraph.nodes = {10, 11, 12};
  subgraph.dist_u = {0, 1, 1};
  subgraph.dist_v = {1, 0, 1};
  subgraph.edge_src = {0, 0, 2};
  subgraph.edge_dst = {1, 2, 1};
  subgraph.edge_relation = {7, 1, 0};  // the target (graph relation 7) is edge 0
  subgraph.target_edge = 0;
  SubgraphBatch batch;
  batch.Add(subgraph, /*target_relation=*/3, RelationMap{5, -1});
  batch.Add(subgraph, /*target_relation=*/3, RelationMap{5, -1});
  // Edge 1 (relation 1 -> -1) is dropped; the target edge carries the model's id.
  EXPECT_THAT(batch.edge_relation, ElementsAre(3, 5, 3, 5));
  EXPECT_THAT(batch.edge_src, ElementsAre(0, 2, 3, 5));
  EXPECT_THAT(batch.head_index, ElementsAre(0, 3));
  EXPECT_THAT(batch.tail_index, ElementsAre(1, 4));
}

}  // namespace
}  // namespace grail
