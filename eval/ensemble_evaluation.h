// Evaluating an ensemble (model/ensemble/ensemble_model.h) on the path family's protocol
// (eval/query_evaluation.h), and collecting the validation queries its rule is fitted on
// (model/ensemble/ensemble_fit.h).
//
// Queries are in the graph's relation ids: (source, r, ?) for r in [0, R) of the graph, the
// inverse query of r - R for r in [R, 2R). Each member runs every query with its own relation
// ids (matched by name; ULTRA's are the graph's) on its own neighbourhood, and an entity's
// combined score is the rule over the members' scores, each member's far score standing for
// an entity beyond its neighbourhood. A path-family member's neighbourhood is its pass's; a
// GraIL member's is what the server's GraIL ranking scores apart (the entities within k + 1
// hops of the source and those with self-loops, each on its own enclosing subgraph), every
// other entity sharing the trivial subgraph's score: a query costs it one subgraph per entity
// of that neighbourhood, which on a dense graph is most of the graph. A KGE member's
// neighbourhood is every entity of the graph it knows (by name, `graph_entities`), for a query
// whose source and relation it knows (else none), each entity it does not know having its
// unknown score: a query costs it one pass over its vocabulary.
#ifndef GRAIL_EVAL_ENSEMBLE_EVALUATION_H_
#define GRAIL_EVAL_ENSEMBLE_EVALUATION_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "eval/path_evaluation.h"
#include "eval/query_evaluation.h"
#include "graph/graph_view.h"
#include "model/ensemble/ensemble_fit.h"
#include "model/ensemble/ensemble_model.h"

namespace grail {

// Runs every query with each member and calls `read(i, scores)` once per query i with the
// combined scores (possibly from several threads at once, for distinct i). `graph_entities` and
// `graph_relations` name the graph's entities and relations in id order (the entities are read
// only for a KGE member). Memory: a few queries' dense rows of the graph's entities at a time
// (and a GraIL member's subgraphs of those queries). Errors: INVALID_ARGUMENT naming a relation
// some member does not know, or for a KGE member without the entities' names; the members'
// forwards' errors.
absl::Status RunEnsembleQueries(const EnsembleModel& model, const GraphView& graph,
                                absl::Span<const std::string> graph_entities,
                                absl::Span<const std::string> graph_relations,
                                absl::Span<const RankingQuery> queries,
                                const PathScoringOptions& options,
                                const std::function<void(size_t, const QueryScores&)>& read);

// The path family's protocol (EvaluatePath) for the ensemble; `test` in the graph's ids.
absl::StatusOr<EvaluationResult> EvaluateEnsemble(const EnsembleModel& model,
                                                  const GraphView& graph,
                                                  absl::Span<const std::string> graph_entities,
                                                  absl::Span<const std::string> graph_relations,
                                                  absl::Span<const Triple> test,
                                                  const PathEvaluationOptions& options);

struct ValidationQueryOptions {
  // Facts of the validation set used, at most (the first ones; each gives a tail and a head
  // query); 0: all.
  size_t max_facts = 500;
  // Per member, the candidates of a query it scores highest that the fit sees on their own;
  // the other entities of the members' neighbourhoods are left out (they hardly move a
  // softmax the best ones dominate), those beyond every neighbourhood form one group.
  size_t top_per_member = 256;
  // The share of the candidates whose score a KGE member gives that the fit is shown as
  // unknown instead (drawn from `seed` per query and candidate), so that it learns what an
  // entity the member does not know is worth beside the ones it does (its unknown score).
  double kge_hidden = 0.25;
  uint64_t seed = 0;
  PathScoringOptions scoring;
};

// The fit's queries from validation facts `valid` (ids of `graph`, not in it): each fact's tail
// query (h, r, ?) with answer t and head query (t, r^-1, ?) with answer h, every other answer
// known from the graph, `valid` and `known` left out of the candidates (filtered, as the full
// ranking is). Each row has EnsembleModel::fit_columns() columns. Errors: as
// RunEnsembleQueries.
absl::StatusOr<std::vector<QueryCandidates>> CollectValidationQueries(
    const EnsembleModel& model, const GraphView& graph,
    absl::Span<const std::string> graph_entities, absl::Span<const std::string> graph_relations,
    absl::Span<const Triple> valid, absl::Span<const Triple> known,
    const ValidationQueryOptions& options);

}  // namespace grail

#endif  // GRAIL_EVAL_ENSEMBLE_EVALUATION_H_
