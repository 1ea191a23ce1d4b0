// The evaluation protocol for models that score every entity of a ranking query in one pass
// (the path family, eval/path_evaluation.h; the KGE models, eval/kge_evaluation.h), on the
// same protocol and negatives as GraIL (eval/evaluation.h), plus ranking against every
// entity.
//
// A fact (h, r, t) is scored as the tail query (h, r, ?) scores t: that is its score for
// AUC-PR and in the tail ranking list. The head ranking list is the inverse query
// (t, r^-1, ?), whose pass scores the true head and every head negative. Negatives are drawn
// exactly as EvaluateGrail() draws them for the same seed, so every family compares on the same
// facts.
//
// Full ranking (filtered): the true tail among every entity but h, and the true head among
// every entity but t, leaving out the other known answers of the query (facts of the graph,
// of `test` and of `known_facts`); ties count as the mean of the optimistic and pessimistic
// rank.
#ifndef GRAIL_EVAL_QUERY_EVALUATION_H_
#define GRAIL_EVAL_QUERY_EVALUATION_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "eval/evaluation.h"
#include "graph/graph_view.h"
#include "graph/relation_map.h"

namespace grail {

// A ranking query: (source, relation, ?) for relation in [0, R) of the model, or the inverse
// query of relation - R, (?, relation - R, source), for relation in [R, 2R).
struct RankingQuery {
  EntityId source = 0;
  int32_t relation = 0;
};

// A query in a graph's relation ids (R of them: r forwards, r + R its inverse) read forwards in
// a model's: `relations` maps the graph's ids to the model's `model_relations`. Sets `inverse`.
// Errors: INVALID_ARGUMENT "relation NAME is unknown to WHO", NAME from `graph_relations`.
absl::StatusOr<int32_t> QueryModelRelation(const RankingQuery& q, int32_t R,
                                           const RelationMap& relations, int32_t model_relations,
                                           absl::Span<const std::string> graph_relations,
                                           absl::string_view who, bool* inverse);

// What one pass gives every entity for one query: some entities have a score of their own,
// all the others share one ("rest").
class QueryScores {
 public:
  virtual ~QueryScores() = default;
  virtual float Of(EntityId entity) const = 0;
  virtual bool HasOwn(EntityId entity) const = 0;
  // Calls fn(entity, score) for every entity with a score of its own.
  virtual void ForEachOwn(absl::FunctionRef<void(EntityId, float)> fn) const = 0;
  virtual int64_t NumOwn() const = 0;
  virtual float Rest() const = 0;
};

// Runs every query and calls `read(i, scores)` once per query i (possibly from several
// threads at once, for distinct i). Errors: the first failure's.
using QueryRunner =
    std::function<absl::Status(absl::Span<const RankingQuery> queries,
                               const std::function<void(size_t, const QueryScores&)>& read)>;

// Known answers of a query, for the filtered full ranking: by (source, query relation in
// [0, 2R)), the entities that complete a fact of the graph or of `facts`.
class KnownAnswers {
 public:
  KnownAnswers(const GraphView& graph, int32_t num_relations,
               std::initializer_list<absl::Span<const Triple>> facts);

  // Calls `fn(entity)` for each known answer of (source, graph relation r, inverse or not);
  // an entity may come more than once.
  template <typename Fn>
  void ForEach(EntityId source, RelationId r, bool inverse, Fn fn) const {
    for (const Neighbor& n : inverse ? graph_.InEdges(source) : graph_.OutEdges(source)) {
      if (n.relation == r) fn(n.entity);
    }
    auto it = extra_.find(Key(source, inverse ? r + num_relations_ : r));
    if (it != extra_.end()) {
      for (EntityId e : it->second) fn(e);
    }
  }

 private:
  static uint64_t Key(EntityId e, int64_t r) { return (static_cast<uint64_t>(e) << 32) | r; }
  const GraphView& graph_;
  const int32_t num_relations_;
  absl::flat_hash_map<uint64_t, absl::flat_hash_set<EntityId>> extra_;
};

struct RankingEvaluationOptions {
  uint64_t seed = 0;
  int negatives = 49;        // per side, for the 50-candidate ranking
  bool sampled = true;       // AUC-PR and the ranking against sampled negatives
  bool full_ranking = true;  // filtered ranking against every entity
  // Facts (ids of the graph) that the full ranking also leaves out of a query's candidates,
  // besides the graph's and the test set's: the usual filtered setting of transductive
  // benchmarks filters the validation facts too. The sampled negatives avoid the graph's
  // facts only, as the GraIL protocol draws them.
  absl::Span<const Triple> known_facts;
};

// Evaluates the model behind `run` on `test` (ids of `graph`; `relations` maps the graph's
// relation ids to the model's, empty for identity; the model has `num_model_relations`).
// Errors: INVALID_ARGUMENT if a test fact cannot be scored (relation unknown to the model,
// head == tail); the runner's errors.
absl::StatusOr<EvaluationResult> EvaluateRankingQueries(
    const GraphView& graph, const RelationMap& relations, int32_t num_model_relations,
    absl::Span<const Triple> test, const RankingEvaluationOptions& options, const QueryRunner& run);

}  // namespace grail

#endif  // GRAIL_EVAL_QUERY_EVALUATION_H_
