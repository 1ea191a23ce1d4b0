#include "eval/query_evaluation.h"

#include <chrono>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "eval/ranking_metrics.h"
#include "graph/negative_sampling.h"

namespace grail {

absl::StatusOr<int32_t> QueryModelRelation(const RankingQuery& q, int32_t R,
                                           const RelationMap& relations, int32_t model_relations,
                                           absl::Span<const std::string> graph_relations,
                                           absl::string_view who, bool* inverse) {
  *inverse = q.relation >= R;
  const int32_t r = *inverse ? q.relation - R : q.relation;
  const bool in_graph = r >= 0 && r < R;
  const int32_t own = in_graph ? relations(static_cast<uint32_t>(r)) : -1;
  if (own < 0 || own >= model_relations) {
    const bool named = in_graph && static_cast<size_t>(r) < graph_relations.size();
    return absl::InvalidArgumentError(absl::StrCat(
        "relation ", named ? graph_relations[r] : absl::StrCat(r), " is unknown to ", who));
  }
  return own;
}

KnownAnswers::KnownAnswers(const GraphView& graph, int32_t num_relations,
                           std::initializer_list<absl::Span<const Triple>> facts)
    : graph_(graph), num_relations_(num_relations) {
  for (absl::Span<const Triple> list : facts) {
    for (const Triple& f : list) {
      if (static_cast<int32_t>(f.relation) >= num_relations) continue;  // never a query's
      extra_[Key(f.head, f.relation)].insert(f.tail);
      extra_[Key(f.tail, f.relation + num_relations)].insert(f.head);
    }
  }
}

absl::StatusOr<EvaluationResult> EvaluateRankingQueries(const GraphView& graph,
                                                        const RelationMap& relations,
                                                        int32_t num_model_relations,
                                                        absl::Span<const Triple> test,
                                                        const RankingEvaluationOptions& options,
                                                        const QueryRunner& run) {
  const int32_t num_relations = num_model_relations;
  auto model_relation = [&](RelationId r) -> int32_t {
    const int32_t m = relations(r);
    return m < num_relations ? m : -1;
  };
  // Per test fact: the tail query (h, r) and the head query (t, r^-1); the negatives drawn as
  // EvaluateGrail() draws them; a head-replaced AUC negative (h', r, t) adds the query (h', r).
  struct Layout {
    size_t tail_query = 0, head_query = 0, auc_query = 0;
    std::optional<Triple> auc_negative;
    std::vector<EntityId> tail_negatives, head_negatives;
  };
  std::vector<Layout> layout(test.size());
  std::vector<RankingQuery> queries;
  SeededRandom random(options.seed);
  for (size_t i = 0; i < test.size(); ++i) {
    const Triple& f = test[i];
    const int32_t r = model_relation(f.relation);
    if (r < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("test fact ", i, ": relation id ", f.relation, " is unknown to the model"));
    }
    if (f.head == f.tail) {
      return absl::InvalidArgumentError(absl::StrCat("test fact ", i, " is a self-loop"));
    }
    Layout& l = layout[i];
    l.tail_query = queries.size();
    queries.push_back({f.head, r});
    l.head_query = queries.size();
    queries.push_back({f.tail, r + num_relations});
    if (options.sampled) {
      l.auc_negative = CorruptHeadOrTail(graph, f, random);
      l.auc_query = l.tail_query;
      if (l.auc_negative && l.auc_negative->head != f.head) {
        l.auc_query = queries.size();
        queries.push_back({l.auc_negative->head, r});
      }
      l.tail_negatives = SampleReplacements(graph, f, Side::kTail, options.negatives, random);
      l.head_negatives = SampleReplacements(graph, f, Side::kHead, options.negatives, random);
    }
  }

  // Per test fact: [tail positive, tail negatives..., head positive, head negatives...,
  // AUC negative], and the full ranks.
  std::vector<std::vector<float>> sampled(test.size());
  // The full ranks: each with its count of filtered candidates (the entities it was ranked
  // among) and its strict rank (FullRanking::strict_mrr).
  struct FullRank {
    double rank = 0;
    int64_t candidates = 0;
    int64_t strict = 0;
  };
  std::vector<FullRank> tail_rank(test.size()), head_rank(test.size());
  std::vector<float> auc_negative_score(test.size());
  std::vector<int32_t> query_fact(queries.size(), -1);
  std::vector<uint8_t> query_role(queries.size(), 0);  // 1 tail, 2 head, 3 AUC negative
  for (size_t i = 0; i < layout.size(); ++i) {
    query_fact[layout[i].tail_query] = static_cast<int32_t>(i);
    query_role[layout[i].tail_query] = 1;
    query_fact[layout[i].head_query] = static_cast<int32_t>(i);
    query_role[layout[i].head_query] = 2;
    if (layout[i].auc_negative && layout[i].auc_query != layout[i].tail_query) {
      query_fact[layout[i].auc_query] = static_cast<int32_t>(i);
      query_role[layout[i].auc_query] = 3;
    }
    sampled[i].assign(2 + layout[i].tail_negatives.size() + layout[i].head_negatives.size(), 0);
  }
  const KnownAnswers known(graph, num_relations, {test, options.known_facts});
  const uint32_t num_entities = graph.num_entities();

  auto full_rank = [&](const QueryScores& scores, EntityId source, RelationId r, bool inverse,
                       EntityId answer) {
    std::vector<uint8_t> skip(num_entities, 0);
    known.ForEach(source, r, inverse, [&](EntityId e) { skip[e] = 1; });
    const bool source_known = skip[source] != 0;
    skip[source] = 1;
    skip[answer] = 1;
    const float positive = scores.Of(answer);
    // Entities without a score of their own share the rest score: count them in bulk.
    int64_t greater = 0, equal = 0, rest_entities = num_entities;
    scores.ForEachOwn([&](EntityId e, float score) {
      --rest_entities;
      if (skip[e]) return;
      greater += ScoresAbove(score, positive);
      equal += ScoresLevel(score, positive);
    });
    int64_t rest_skipped = 0, skipped = 0;
    for (uint32_t e = 0; e < num_entities; ++e) {
      if (!skip[e]) continue;
      ++skipped;
      if (!scores.HasOwn(e)) ++rest_skipped;
    }
    const int64_t rest_candidates = rest_entities - rest_skipped;
    const float rest = scores.Rest();
    if (ScoresAbove(rest, positive)) greater += rest_candidates;
    if (ScoresLevel(rest, positive)) equal += rest_candidates;
    const float source_score = scores.Of(source);
    const bool source_counts = !source_known && (ScoresAbove(source_score, positive) ||
                                                 ScoresLevel(source_score, positive));
    return FullRank{1.0 + static_cast<double>(greater) + static_cast<double>(equal) / 2.0,
                    static_cast<int64_t>(num_entities) - skipped,
                    1 + greater + equal + (source_counts ? 1 : 0)};
  };

  const auto start = std::chrono::steady_clock::now();
  absl::Status ran = run(queries, [&](size_t qi, const QueryScores& scores) {
    const size_t i = static_cast<size_t>(query_fact[qi]);
    const Triple& f = test[i];
    const Layout& l = layout[i];
    std::vector<float>& s = sampled[i];
    const size_t head_begin = 1 + l.tail_negatives.size();
    switch (query_role[qi]) {
      case 1:
        s[0] = scores.Of(f.tail);
        for (size_t k = 0; k < l.tail_negatives.size(); ++k) {
          s[1 + k] = scores.Of(l.tail_negatives[k]);
        }
        if (l.auc_negative && l.auc_query == l.tail_query) {
          auc_negative_score[i] = scores.Of(l.auc_negative->tail);
        }
        if (options.full_ranking) {
          tail_rank[i] = full_rank(scores, f.head, f.relation, false, f.tail);
        }
        break;
      case 2:
        s[head_begin] = scores.Of(f.head);
        for (size_t k = 0; k < l.head_negatives.size(); ++k) {
          s[head_begin + 1 + k] = scores.Of(l.head_negatives[k]);
        }
        if (options.full_ranking) {
          head_rank[i] = full_rank(scores, f.tail, f.relation, true, f.head);
        }
        break;
      case 3:
        auc_negative_score[i] = scores.Of(l.auc_negative->tail);
        break;
    }
  });
  if (!ran.ok()) return ran;

  EvaluationResult result;
  result.subgraphs_scored = static_cast<int64_t>(queries.size());
  result.scoring_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.n = static_cast<int64_t>(test.size());
  const double lists = 2.0 * static_cast<double>(test.size());
  if (lists == 0) return result;
  if (options.sampled) {
    std::vector<float> auc_scores;
    std::vector<uint8_t> auc_labels;
    for (size_t i = 0; i < test.size(); ++i) {
      const std::vector<float>& s = sampled[i];
      auc_scores.push_back(s[0]);
      auc_labels.push_back(1);
      if (layout[i].auc_negative) {
        auc_scores.push_back(auc_negative_score[i]);
        auc_labels.push_back(0);
      }
      const size_t head_begin = 1 + layout[i].tail_negatives.size();
      const absl::Span<const float> all(s);
      for (const auto& [positive, negatives] :
           {std::make_pair(s[0], all.subspan(1, head_begin - 1)),
            std::make_pair(s[head_begin], all.subspan(head_begin + 1))}) {
        const double rank = RankAmong(positive, negatives);
        result.mrr += 1.0 / rank / lists;
        result.hits_at_1 += (rank <= 1 ? 1 : 0) / lists;
        result.hits_at_5 += (rank <= 5 ? 1 : 0) / lists;
        result.hits_at_10 += (rank <= 10 ? 1 : 0) / lists;
      }
    }
    result.auc_pr = AveragePrecision(auc_scores, auc_labels);
  }
  if (options.full_ranking) {
    FullRanking& full = result.full.emplace();
    full.reciprocal_ranks.reserve(2 * test.size());
    for (size_t i = 0; i < test.size(); ++i) {
      for (const FullRank& r : {tail_rank[i], head_rank[i]}) {
        full.reciprocal_ranks.push_back(1.0 / r.rank);
        full.mrr += 1.0 / r.rank / lists;
        full.hits_at_1 += (r.rank <= 1 ? 1 : 0) / lists;
        full.hits_at_3 += (r.rank <= 3 ? 1 : 0) / lists;
        full.hits_at_10 += (r.rank <= 10 ? 1 : 0) / lists;
        full.hits_at_10_of_50 += ExpectedHitsAmongSamples(r.rank, r.candidates, 10, 50) / lists;
        full.strict_mrr += 1.0 / static_cast<double>(r.strict) / lists;
        full.strict_hits_at_1 += (r.strict <= 1 ? 1 : 0) / lists;
        full.strict_hits_at_10 += (r.strict <= 10 ? 1 : 0) / lists;
      }
    }
  }
  return result;
}

}  // namespace grail
