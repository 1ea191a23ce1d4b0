// GraIL's ranking of every entity offline, as the server ranks with GraIL
// (server/scoring/scoring_jobs.h): for a query (source, r, ?) or (?, r, source), each entity
// within k + 1 hops of the source, and each with a self-loop, is scored on its own enclosing
// subgraph; every other entity's enclosing subgraph is the trivial one (the two entities and
// the target edge: model/grail/enclosing_subgraph.h, TrivialSubgraphDistance), so they share
// the score of one of them. A query costs one subgraph per entity of that neighbourhood: on a
// sparse graph a few hundred, on a dense one most of the graph.
#ifndef GRAIL_EVAL_GRAIL_RANKING_H_
#define GRAIL_EVAL_GRAIL_RANKING_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "eval/evaluation.h"
#include "eval/query_evaluation.h"
#include "graph/graph_view.h"
#include "graph/relation_map.h"
#include "model/grail/fact_scoring.h"
#include "model/grail/grail_model.h"

namespace grail {

// One query's scores.
struct GrailQueryScores {
  std::vector<EntityId> near;  // sorted: the entities scored on their own subgraphs
  std::vector<float> score;    // near's
  float far = 0;               // every other entity's but the source's (0 when there is none)
};

// Runs `queries` in the graph's relation ids ((source, r, ?) for r in [0, R), the inverse
// query of r - R for r in [R, 2R); `relations` maps them to the model's, `graph_relations`
// names them for errors) and calls `read(i, scores)` for each, in order, from this thread.
// Subgraphs are scored on options.threads workers, a bounded number of queries' at a time.
// Errors: INVALID_ARGUMENT naming a relation the model does not know, or for a model with node
// features (early fusion: far entities do not share a score); ScoreGrailFacts' errors.
absl::Status RunGrailQueries(const GrailModel& model, const GraphView& graph,
                             const RelationMap& relations,
                             absl::Span<const std::string> graph_relations,
                             absl::Span<const RankingQuery> queries,
                             const GrailScoringOptions& options,
                             const std::function<void(size_t, const GrailQueryScores&)>& read);

// The filtered ranking of every test fact against every entity (EvaluationResult::full; the
// sampled protocol's fields are left at 0), each query ranked as above. `known` as
// RankingEvaluationOptions::known_facts. Errors: as RunGrailQueries; INVALID_ARGUMENT for a
// test fact with head == tail.
absl::StatusOr<EvaluationResult> EvaluateGrailFullRanking(
    const GrailModel& model, const GraphView& graph, const RelationMap& relations,
    absl::Span<const std::string> graph_relations, absl::Span<const Triple> test,
    absl::Span<const Triple> known, const GrailScoringOptions& options);

}  // namespace grail

#endif  // GRAIL_EVAL_GRAIL_RANKING_H_
