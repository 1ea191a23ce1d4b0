#include "eval/grail_ranking.h"

#include <algorithm>
#include <cstdint>
#include <iterator>

#include "model/grail/enclosing_subgraph.h"

namespace grail {
namespace {

// Subgraphs scored in one ScoreGrailFacts call, at most (a query's are never split).
constexpr size_t kChunkFacts = size_t{1} << 18;

// A query's scores as QueryScores (eval/query_evaluation.h) over `entities` entities.
class GrailScores : public QueryScores {
 public:
  explicit GrailScores(const GrailQueryScores& s) : s_(s) {}
  float Of(EntityId e) const override {
    auto it = std::lower_bound(s_.near.begin(), s_.near.end(), e);
    return it != s_.near.end() && *it == e ? s_.score[it - s_.near.begin()] : s_.far;
  }
  bool HasOwn(EntityId e) const override {
    return std::binary_search(s_.near.begin(), s_.near.end(), e);
  }
  void ForEachOwn(absl::FunctionRef<void(EntityId, float)> fn) const override {
    for (size_t i = 0; i < s_.near.size(); ++i) fn(s_.near[i], s_.score[i]);
  }
  int64_t NumOwn() const override { return static_cast<int64_t>(s_.near.size()); }
  float Rest() const override { return s_.far; }

 private:
  const GrailQueryScores& s_;
};

}  // namespace

absl::Status RunGrailQueries(const GrailModel& model, const GraphView& graph,
                             const RelationMap& relations,
                             absl::Span<const std::string> graph_relations,
                             absl::Span<const RankingQuery> queries,
                             const GrailScoringOptions& options,
                             const std::function<void(size_t, const GrailQueryScores&)>& read) {
  if (model.config().node_feature_dim > 0) {
    return absl::InvalidArgumentError(
        "ranking every entity offline with a GraIL model with node features (early fusion) is "
        "not supported: its far entities do not share a score");
  }
  const int32_t R = static_cast<int32_t>(graph.num_relations());
  const uint32_t entities = graph.num_entities();
  const ExtractionConfig extraction = model.config().extraction();
  const int reach = TrivialSubgraphDistance(extraction) - 1;
  const absl::Span<const EntityId> loops = graph.SelfLoopEntities();
  const int32_t model_relations = static_cast<int32_t>(model.relations().size());
  std::vector<GrailQueryScores> rows;
  std::vector<Triple> facts;
  std::vector<uint8_t> has_far;
  for (size_t begin = 0; begin < queries.size();) {
    rows.clear();
    facts.clear();
    has_far.clear();
    size_t end = begin;
    while (end < queries.size() && (end == begin || facts.size() < kChunkFacts)) {
      const RankingQuery& q = queries[end];
      bool inverse = false;
      absl::StatusOr<int32_t> own = QueryModelRelation(
          q, R, relations, model_relations, graph_relations, "the GraIL model", &inverse);
      if (!own.ok()) return own.status();
      const RelationId rel = static_cast<RelationId>(q.relation - (inverse ? R : 0));
      GrailQueryScores& row = rows.emplace_back();
      if (extraction.enclosing) {
        const std::vector<EntityId> within = *EntitiesWithinHops(graph, q.source, reach, entities);
        std::set_union(within.begin(), within.end(), loops.begin(), loops.end(),
                       std::back_inserter(row.near));
      } else {  // the "no enclosing" ablation keeps both neighbourhoods whole: no one shares
        for (EntityId e = 0; e < entities; ++e) row.near.push_back(e);
      }
      row.near.erase(std::remove(row.near.begin(), row.near.end(), q.source), row.near.end());
      auto fact = [&](EntityId c) {
        return inverse ? Triple{c, rel, q.source} : Triple{q.source, rel, c};
      };
      for (EntityId c : row.near) facts.push_back(fact(c));
      // The far entities' representative: the first entity neither near nor the source.
      has_far.push_back(0);
      for (EntityId e = 0; e < entities; ++e) {
        if (e != q.source && !std::binary_search(row.near.begin(), row.near.end(), e)) {
          facts.push_back(fact(e));
          has_far.back() = 1;
          break;
        }
      }
      ++end;
    }
    absl::StatusOr<std::vector<float>> scores =
        ScoreGrailFacts(model, graph, relations, facts, options);
    if (!scores.ok()) return scores.status();
    size_t next = 0;
    for (size_t k = 0; k < rows.size(); ++k) {
      GrailQueryScores& row = rows[k];
      row.score.assign(scores->begin() + next, scores->begin() + next + row.near.size());
      next += row.near.size();
      row.far = has_far[k] ? (*scores)[next++] : 0.0f;
      read(begin + k, row);
    }
    begin = end;
  }
  return absl::OkStatus();
}

absl::StatusOr<EvaluationResult> EvaluateGrailFullRanking(
    const GrailModel& model, const GraphView& graph, const RelationMap& relations,
    absl::Span<const std::string> graph_relations, absl::Span<const Triple> test,
    absl::Span<const Triple> known, const GrailScoringOptions& options) {
  RankingEvaluationOptions ranking;
  ranking.sampled = false;
  ranking.full_ranking = true;
  ranking.known_facts = known;
  // Queries in the graph's relation ids; RunGrailQueries maps them to the model's.
  return EvaluateRankingQueries(
      graph, RelationMap(), static_cast<int32_t>(graph.num_relations()), test, ranking,
      [&](absl::Span<const RankingQuery> queries,
          const std::function<void(size_t, const QueryScores&)>& read) {
        return RunGrailQueries(
            model, graph, relations, graph_relations, queries, options,
            [&](size_t i, const GrailQueryScores& s) { read(i, GrailScores(s)); });
      });
}

}  // namespace grail
