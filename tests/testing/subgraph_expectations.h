// GoogleTest expectations about extracted subgraphs, shared by the extraction tests.
#ifndef GRAIL_TESTS_TESTING_SUBGRAPH_EXPECTATIONS_H_
#define GRAIL_TESTS_TESTING_SUBGRAPH_EXPECTATIONS_H_

#include "gtest/gtest.h"
#include "model/grail/enclosing_subgraph.h"

namespace grail {

// Identical subgraphs: the same nodes in the same order, labels, edges and target edge.
inline void ExpectSameSubgraph(const EnclosingSubgraph& a, const EnclosingSubgraph& b) {
  EXPECT_EQ(a.nodes, b.nodes);
  EXPECT_EQ(a.dist_u, b.dist_u);
  EXPECT_EQ(a.dist_v, b.dist_v);
  EXPECT_EQ(a.edge_src, b.edge_src);
  EXPECT_EQ(a.edge_dst, b.edge_dst);
  EXPECT_EQ(a.edge_relation, b.edge_relation);
  EXPECT_EQ(a.target_edge, b.target_edge);
  EXPECT_EQ(a.target_in_graph, b.target_in_graph);
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_SUBGRAPH_EXPECTATIONS_H_
