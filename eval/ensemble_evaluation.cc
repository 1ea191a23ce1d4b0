#include "eval/ensemble_evaluation.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "eval/grail_ranking.h"

namespace grail {
namespace {

// Queries whose dense rows of every entity, one per member, a chunk holds at once: about
// 2^24 floats, at least one query.
size_t ChunkQueries(uint32_t entities, size_t members) {
  const size_t per_query = std::max<size_t>(1, size_t{entities} * members);
  return std::clamp<size_t>((size_t{1} << 24) / per_query, 1, 256);
}

// One query's scores from each member: a dense row of every entity (valid where the member
// has a score of its own), the entities it scored, and its far score.
struct MemberRow {
  std::vector<float> score;
  std::vector<EntityId> own;
  std::vector<uint8_t> has;
  float far = 0;

  // Forgets the previous query's own entities (has[] back to 0 where it was set).
  void ClearOwn() {
    for (EntityId e : own) has[e] = 0;
    own.clear();
  }
};

// A query's rows from every member, reused across chunks.
struct QueryRows {
  std::vector<MemberRow> member;
};

// Member m's rows of `queries` (the chunk's, rows[k] for queries[k]) when it is a GraIL model:
// GraIL's ranking of every entity (eval/grail_ranking.h).
absl::Status RunGrailMember(const GrailModel& member, const GraphView& graph,
                            const RelationMap& map, absl::Span<const std::string> graph_relations,
                            absl::Span<const RankingQuery> queries, size_t m, int threads,
                            std::vector<QueryRows>& rows) {
  GrailScoringOptions options;
  options.threads = threads;
  auto keep = [&](size_t k, const GrailQueryScores& scores) {
    MemberRow& row = rows[k].member[m];
    row.ClearOwn();
    row.own = scores.near;
    for (size_t i = 0; i < scores.near.size(); ++i) {
      row.has[scores.near[i]] = 1;
      row.score[scores.near[i]] = scores.score[i];
    }
    row.far = scores.far;
  };
  absl::Status ran = RunGrailQueries(member, graph, map, graph_relations, queries, options, keep);
  if (ran.ok()) return ran;
  return absl::Status(ran.code(), absl::StrCat("the ensemble's member ", m, ": ", ran.message()));
}

// KGE member m's ids of the graph's entities, the other way round: graph[k] is the graph's id
// of its entity k, or -1 (looked up in the ensemble's vocabulary of the member, KgeEntity).
std::vector<int64_t> GraphIdsOfKgeEntities(const EnsembleModel& model, size_t m,
                                           absl::Span<const std::string> graph_entities) {
  std::vector<int64_t> graph(model.kge_member(m)->num_entities(), -1);
  for (size_t e = 0; e < graph_entities.size(); ++e) {
    if (const std::optional<uint32_t> k = model.KgeEntity(m, graph_entities[e])) {
      graph[*k] = static_cast<int64_t>(e);
    }
  }
  return graph;
}

// Member m's rows of `queries` (the chunk's) when it is a KGE model: its score of every entity
// of the graph it knows (`graph_ids`, GraphIdsOfKgeEntities) for a query whose source it knows,
// its unknown score for every other.
absl::Status RunKgeMember(const EnsembleModel& model, size_t m, const RelationMap& map,
                          absl::Span<const std::string> graph_entities,
                          absl::Span<const std::string> graph_relations,
                          absl::Span<const int64_t> graph_ids, int32_t R,
                          absl::Span<const RankingQuery> queries, std::vector<QueryRows>& rows) {
  const KgeModel& member = *model.kge_member(m);
  const std::string who = absl::StrCat("the ensemble's member ", m);
  std::vector<KgeQuery> known;
  std::vector<size_t> known_row;  // the chunk's row of known[j]
  for (size_t k = 0; k < queries.size(); ++k) {
    MemberRow& row = rows[k].member[m];
    row.ClearOwn();
    row.far = static_cast<float>(model.unknown_score(m));
    bool inverse = false;
    absl::StatusOr<int32_t> relation = QueryModelRelation(
        queries[k], R, map, member.num_relations(), graph_relations, who, &inverse);
    if (!relation.ok()) return relation.status();
    if (queries[k].source >= graph_entities.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, " is a KGE model, which needs the names of the graph's entities"));
    }
    const std::optional<uint32_t> source = model.KgeEntity(m, graph_entities[queries[k].source]);
    if (!source) continue;  // every entity has the unknown score
    known.push_back({*source, static_cast<RelationId>(*relation), inverse});
    known_row.push_back(k);
  }
  if (known.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<float>> scores = member.ScoreAll(known);
  if (!scores.ok()) {
    return absl::Status(scores.status().code(), absl::StrCat(who, ": ", scores.status().message()));
  }
  const size_t n = member.num_entities();
  for (size_t j = 0; j < known.size(); ++j) {
    MemberRow& row = rows[known_row[j]].member[m];
    for (size_t k = 0; k < n; ++k) {
      if (graph_ids[k] < 0) continue;
      const EntityId e = static_cast<EntityId>(graph_ids[k]);
      row.has[e] = 1;
      row.own.push_back(e);
      row.score[e] = (*scores)[j * n + k];
    }
  }
  return absl::OkStatus();
}

// Runs `queries` (graph relation ids) with every member, `chunk` queries at a time, and calls
// `use(i, rows)` for each once all members have run it.
absl::Status RunMembers(const EnsembleModel& model, const GraphView& graph,
                        absl::Span<const std::string> graph_entities,
                        absl::Span<const std::string> graph_relations,
                        absl::Span<const RankingQuery> queries, const PathScoringOptions& options,
                        const std::function<void(size_t, const QueryRows&)>& use) {
  const size_t members = model.size();
  const int32_t R = static_cast<int32_t>(graph.num_relations());
  const uint32_t entities = graph.num_entities();
  std::vector<RelationMap> maps;
  std::vector<std::vector<int64_t>> kge_graph_ids(members);  // a KGE member's
  for (size_t m = 0; m < members; ++m) {
    maps.push_back(model.MemberRelations(m, graph_relations));
    if (model.kge_member(m) != nullptr) {
      kge_graph_ids[m] = GraphIdsOfKgeEntities(model, m, graph_entities);
    }
  }
  const size_t chunk = ChunkQueries(entities, members);
  std::vector<QueryRows> rows(std::min(chunk, queries.size()));
  for (QueryRows& q : rows) {
    q.member.resize(members);
    for (MemberRow& row : q.member) {
      row.score.assign(entities, 0.0f);
      row.has.assign(entities, 0);
    }
  }
  std::vector<PathQuery> member_queries;
  for (size_t begin = 0; begin < queries.size(); begin += chunk) {
    const size_t end = std::min(queries.size(), begin + chunk);
    for (size_t m = 0; m < members; ++m) {
      if (model.kge_member(m) != nullptr) {
        absl::Status ran =
            RunKgeMember(model, m, maps[m], graph_entities, graph_relations, kge_graph_ids[m], R,
                         queries.subspan(begin, end - begin), rows);
        if (!ran.ok()) return ran;
        continue;
      }
      if (const GrailModel* grail = model.grail_member(m)) {
        absl::Status ran =
            RunGrailMember(*grail, graph, maps[m], graph_relations,
                           queries.subspan(begin, end - begin), m, options.threads, rows);
        if (!ran.ok()) return ran;
        continue;
      }
      const PathModel& member = *model.path_member(m);
      const int32_t member_r = member.NumRelations(graph);
      member_queries.clear();
      for (size_t i = begin; i < end; ++i) {
        bool inverse = false;
        absl::StatusOr<int32_t> own =
            QueryModelRelation(queries[i], R, maps[m], member_r, graph_relations,
                               absl::StrCat("the ensemble's member ", m), &inverse);
        if (!own.ok()) return own.status();
        member_queries.emplace_back(queries[i].source, inverse ? *own + member_r : *own);
      }
      absl::Status ran = RunPathQueries(
          member, graph, maps[m], member_queries, options,
          [&](size_t k, const PathBatch& batch, int64_t q, const PathScores& scores) {
            MemberRow& row = rows[k].member[m];
            row.ClearOwn();
            for (int64_t node = batch.node_begin[q]; node < batch.node_begin[q + 1]; ++node) {
              const EntityId e = static_cast<EntityId>(batch.node_entity[node]);
              if (row.has[e]) continue;
              row.has[e] = 1;
              row.own.push_back(e);
              row.score[e] = scores.node[node];
            }
            row.far = scores.far[q];
          });
      if (!ran.ok()) return ran;
    }
    for (size_t i = begin; i < end; ++i) use(i, rows[i - begin]);
  }
  return absl::OkStatus();
}

// The combined scores of one query: b + sum_m w_m s_m, each member's far score standing for
// the entities beyond its neighbourhood.
class CombinedScores : public QueryScores {
 public:
  CombinedScores(const EnsembleModel& model, const QueryRows& rows) : rows_(rows) {
    const LinearFusion& rule = model.rule();
    rest_ = rule.bias;
    for (size_t m = 0; m < rows.member.size(); ++m) rest_ += rule.weights[m] * rows.member[m].far;
    weights_ = rule.weights;
    for (const MemberRow& row : rows.member) {
      for (EntityId e : row.own) own_.push_back(e);
    }
    std::sort(own_.begin(), own_.end());
    own_.erase(std::unique(own_.begin(), own_.end()), own_.end());
  }
  float Of(EntityId e) const override {
    double s = rest_;
    for (size_t m = 0; m < weights_.size(); ++m) {
      const MemberRow& row = rows_.member[m];
      if (row.has[e]) s += weights_[m] * (row.score[e] - row.far);
    }
    return static_cast<float>(s);
  }
  bool HasOwn(EntityId e) const override {
    for (const MemberRow& row : rows_.member) {
      if (row.has[e]) return true;
    }
    return false;
  }
  void ForEachOwn(absl::FunctionRef<void(EntityId, float)> fn) const override {
    for (EntityId e : own_) fn(e, Of(e));
  }
  int64_t NumOwn() const override { return static_cast<int64_t>(own_.size()); }
  float Rest() const override { return static_cast<float>(rest_); }

 private:
  const QueryRows& rows_;
  std::vector<double> weights_;
  std::vector<EntityId> own_;
  double rest_ = 0;
};

}  // namespace

absl::Status RunEnsembleQueries(const EnsembleModel& model, const GraphView& graph,
                                absl::Span<const std::string> graph_entities,
                                absl::Span<const std::string> graph_relations,
                                absl::Span<const RankingQuery> queries,
                                const PathScoringOptions& options,
                                const std::function<void(size_t, const QueryScores&)>& read) {
  return RunMembers(model, graph, graph_entities, graph_relations, queries, options,
                    [&](size_t i, const QueryRows& rows) { read(i, CombinedScores(model, rows)); });
}

absl::StatusOr<EvaluationResult> EvaluateEnsemble(const EnsembleModel& model,
                                                  const GraphView& graph,
                                                  absl::Span<const std::string> graph_entities,
                                                  absl::Span<const std::string> graph_relations,
                                                  absl::Span<const Triple> test,
                                                  const PathEvaluationOptions& options) {
  return EvaluateRankingQueries(
      graph, RelationMap(), static_cast<int32_t>(graph.num_relations()), test, options,
      [&](absl::Span<const RankingQuery> queries,
          const std::function<void(size_t, const QueryScores&)>& read) {
        return RunEnsembleQueries(model, graph, graph_entities, graph_relations, queries,
                                  options.scoring, read);
      });
}

absl::StatusOr<std::vector<QueryCandidates>> CollectValidationQueries(
    const EnsembleModel& model, const GraphView& graph,
    absl::Span<const std::string> graph_entities, absl::Span<const std::string> graph_relations,
    absl::Span<const Triple> valid, absl::Span<const Triple> known,
    const ValidationQueryOptions& options) {
  const int32_t R = static_cast<int32_t>(graph.num_relations());
  const size_t members = model.size();
  // Whether the fit is shown KGE member m's score of candidate e of query i as unknown.
  const double hide = options.kge_hidden;
  auto hidden = [&](size_t i, EntityId e) {
    const uint64_t draw = MixBits(options.seed ^ MixBits(uint64_t{i} << 32 | e)) >> 11;
    return static_cast<double>(draw) * 0x1p-53 < hide;
  };
  const uint32_t entities = graph.num_entities();
  const size_t facts =
      options.max_facts == 0 ? valid.size() : std::min(options.max_facts, valid.size());
  std::vector<RankingQuery> queries;
  std::vector<EntityId> answers;
  for (size_t i = 0; i < facts; ++i) {
    const Triple& f = valid[i];
    if (f.head == f.tail) continue;
    queries.push_back({f.head, static_cast<int32_t>(f.relation)});
    answers.push_back(f.tail);
    queries.push_back({f.tail, static_cast<int32_t>(f.relation) + R});
    answers.push_back(f.head);
  }
  const KnownAnswers known_answers(graph, R, {valid, known});
  std::vector<QueryCandidates> out(queries.size());
  absl::Status ran = RunMembers(
      model, graph, graph_entities, graph_relations, queries, options.scoring,
      [&](size_t i, const QueryRows& rows) {
        const RankingQuery& q = queries[i];
        const EntityId answer = answers[i];
        const bool inverse = q.relation >= R;
        // Left out: the source and every other known answer.
        absl::flat_hash_set<EntityId> skip = {q.source};
        known_answers.ForEach(q.source,
                              static_cast<RelationId>(inverse ? q.relation - R : q.relation),
                              inverse, [&](EntityId e) {
                                if (e != answer) skip.insert(e);
                              });
        auto score_of = [&](size_t m, EntityId e) {
          const MemberRow& row = rows.member[m];
          return row.has[e] ? row.score[e] : row.far;
        };
        QueryCandidates& c = out[i];
        // EnsembleModel::fit_columns(): each member's score, then each KGE member's "unknown".
        std::vector<float> unknown;
        auto add_row = [&](EntityId e, double count) {
          unknown.clear();
          for (size_t m = 0; m < members; ++m) {
            if (model.kge_member(m) == nullptr) {
              c.scores.push_back(score_of(m, e));
              continue;
            }
            const bool known_to_m = rows.member[m].has[e] && !hidden(i, e);
            c.scores.push_back(known_to_m ? rows.member[m].score[e] : 0.0f);
            unknown.push_back(known_to_m ? 0.0f : 1.0f);
          }
          c.scores.insert(c.scores.end(), unknown.begin(), unknown.end());
          c.count.push_back(count);
        };
        add_row(answer, 1);
        // Each member's best candidates, once each.
        std::vector<EntityId> picked;
        absl::flat_hash_set<EntityId> own_any;
        for (size_t m = 0; m < members; ++m) {
          const MemberRow& row = rows.member[m];
          std::vector<EntityId> own;
          for (EntityId e : row.own) {
            own_any.insert(e);
            if (e != answer && !skip.contains(e)) own.push_back(e);
          }
          const size_t keep = std::min(options.top_per_member, own.size());
          std::partial_sort(own.begin(), own.begin() + keep, own.end(),
                            [&](EntityId a, EntityId b) { return row.score[a] > row.score[b]; });
          picked.insert(picked.end(), own.begin(), own.begin() + keep);
        }
        std::sort(picked.begin(), picked.end());
        picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
        for (EntityId e : picked) add_row(e, 1);
        // The entities beyond every member's neighbourhood share each member's far score.
        int64_t beyond = static_cast<int64_t>(entities) - static_cast<int64_t>(own_any.size());
        for (EntityId e : skip) beyond -= own_any.contains(e) ? 0 : 1;
        if (!own_any.contains(answer)) --beyond;
        if (beyond > 0) {
          unknown.clear();
          for (size_t m = 0; m < members; ++m) {
            const bool kge = model.kge_member(m) != nullptr;
            c.scores.push_back(kge ? 0.0f : rows.member[m].far);
            if (kge) unknown.push_back(1.0f);
          }
          c.scores.insert(c.scores.end(), unknown.begin(), unknown.end());
          c.count.push_back(static_cast<double>(beyond));
        }
      });
  if (!ran.ok()) return ran;
  // A query whose answer is its only candidate tells the fit nothing.
  out.erase(
      std::remove_if(out.begin(), out.end(), [](const QueryCandidates& c) { return c.rows() < 2; }),
      out.end());
  return out;
}

}  // namespace grail
