// GraIL's score of every candidate of one query, each fact on its own enclosing subgraph: the
// brute-force reference for rankings that let far candidates share a score.
#ifndef GRAIL_TESTS_TESTING_GRAIL_OWN_SCORES_H_
#define GRAIL_TESTS_TESTING_GRAIL_OWN_SCORES_H_

#include <cmath>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/graph_view.h"
#include "graph/relation_map.h"
#include "gtest/gtest.h"
#include "model/grail/fact_scoring.h"
#include "model/grail/grail_model.h"

namespace grail {

// The score of (source, r, e) (heads: (e, r, source)) for every entity e but the source, r in
// the graph's ids mapped by `relations`; NaN for the source.
inline std::vector<float> GrailOwnScores(const GrailModel& model, const GraphView& graph,
                                         const RelationMap& relations, EntityId source, uint32_t r,
                                         bool heads) {
  std::vector<Triple> facts;
  for (EntityId e = 0; e < graph.num_entities(); ++e) {
    if (e != source) facts.push_back(heads ? Triple{e, r, source} : Triple{source, r, e});
  }
  absl::StatusOr<std::vector<float>> scored =
      ScoreGrailFacts(model, graph, relations, facts, GrailScoringOptions());
  EXPECT_TRUE(scored.ok()) << scored.status();
  std::vector<float> out(graph.num_entities(), std::nanf(""));
  if (!scored.ok()) return out;
  for (size_t i = 0; i < facts.size(); ++i) {
    out[heads ? facts[i].head : facts[i].tail] = (*scored)[i];
  }
  return out;
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_GRAIL_OWN_SCORES_H_
