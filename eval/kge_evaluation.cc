#include "eval/kge_evaluation.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace grail {
namespace {

// One query's row of KgeModel::ScoreAll, over the graph's first `n` entities: every entity
// has a score of its own.
class DenseQueryScores : public QueryScores {
 public:
  DenseQueryScores(const float* row, uint32_t n) : row_(row), n_(n) {}
  float Of(EntityId entity) const override { return row_[entity]; }
  bool HasOwn(EntityId entity) const override { return entity < n_; }
  void ForEachOwn(absl::FunctionRef<void(EntityId, float)> fn) const override {
    for (uint32_t e = 0; e < n_; ++e) fn(e, row_[e]);
  }
  int64_t NumOwn() const override { return n_; }
  float Rest() const override { return 0; }  // no entity is left to share it

 private:
  const float* row_;
  const uint32_t n_;
};

}  // namespace

absl::StatusOr<EvaluationResult> EvaluateKge(const KgeModel& model, const GraphView& graph,
                                             const RelationMap& relations,
                                             absl::Span<const Triple> test,
                                             const KgeEvaluationOptions& options) {
  if (graph.num_entities() > model.num_entities()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the graph has ", graph.num_entities(), " entities, the KGE model knows only ",
        model.num_entities(), ": a KGE model scores only the entities it was trained with"));
  }
  const int32_t num_relations = model.num_relations();
  const uint32_t n = graph.num_entities();
  const size_t per_pass = static_cast<size_t>(std::max(1, options.queries_per_pass));
  return EvaluateRankingQueries(
      graph, relations, num_relations, test, options,
      [&](absl::Span<const RankingQuery> queries,
          const std::function<void(size_t, const QueryScores&)>& read) -> absl::Status {
        for (size_t begin = 0; begin < queries.size(); begin += per_pass) {
          const size_t end = std::min(queries.size(), begin + per_pass);
          std::vector<KgeQuery> pass;
          for (size_t i = begin; i < end; ++i) {
            const RankingQuery& q = queries[i];
            const bool inverse = q.relation >= num_relations;
            const int32_t r = inverse ? q.relation - num_relations : q.relation;
            pass.push_back({q.source, static_cast<RelationId>(r), inverse});
          }
          absl::StatusOr<std::vector<float>> scores = model.ScoreAll(pass);
          if (!scores.ok()) return scores.status();
          for (size_t i = begin; i < end; ++i) {
            read(i, DenseQueryScores(scores->data() + (i - begin) * model.num_entities(), n));
          }
        }
        return absl::OkStatus();
      });
}

}  // namespace grail
