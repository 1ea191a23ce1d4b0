// One fact's score as the service reports it, whatever the family scored it.
#ifndef GRAIL_SERVER_SCORING_FACT_SCORE_H_
#define GRAIL_SERVER_SCORING_FACT_SCORE_H_

#include <cstdint>

namespace grail {

struct FactScore {
  float score = 0;
  int32_t subgraph_nodes = 0;  // what it was scored on: the enclosing subgraph, the
  int32_t subgraph_edges = 0;  // query's neighbourhood
  bool known_fact = false;     // whether the graph holds the fact itself
  // Whether the query's neighbourhood was pruned to the server's budget (PathBudget):
  // the score is approximate.
  bool pruned = false;
  // The graph version the score was computed on: the call's, or an earlier one where the call
  // accepted a pass behind the graph (Staleness).
  uint64_t graph_sequence = 0;
};

}  // namespace grail

#endif  // GRAIL_SERVER_SCORING_FACT_SCORE_H_
