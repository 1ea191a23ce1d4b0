#include "eval/evaluation.h"

#include <chrono>
#include <cmath>
#include <vector>

#include "common/json.h"
#include "common/seeded_random.h"
#include "eval/ranking_metrics.h"
#include "graph/negative_sampling.h"

namespace grail {
namespace {

// The sample standard deviation of `values` (0 for fewer than two).
double SampleStandardDeviation(absl::Span<const double> values) {
  if (values.size() < 2) return 0;
  double mean = 0;
  for (double v : values) mean += v / static_cast<double>(values.size());
  double squares = 0;
  for (double v : values) squares += (v - mean) * (v - mean);
  return std::sqrt(squares / static_cast<double>(values.size() - 1));
}

}  // namespace

std::string EvaluationResult::ToJson() const {
  Json json = {{"auc_pr", RoundTo(auc_pr, 6)},         {"mrr", RoundTo(mrr, 6)},
               {"hits_at_1", RoundTo(hits_at_1, 6)},   {"hits_at_5", RoundTo(hits_at_5, 6)},
               {"hits_at_10", RoundTo(hits_at_10, 6)}, {"n", n}};
  if (runs > 1) {
    json["runs"] = runs;
    json["auc_pr_std"] = RoundTo(auc_pr_std, 6);
  }
  if (full) {
    json["full_mrr"] = RoundTo(full->mrr, 6);
    json["full_hits_at_1"] = RoundTo(full->hits_at_1, 6);
    json["full_hits_at_3"] = RoundTo(full->hits_at_3, 6);
    json["full_hits_at_10"] = RoundTo(full->hits_at_10, 6);
    json["full_hits_at_10_of_50"] = RoundTo(full->hits_at_10_of_50, 6);
    json["full_strict_mrr"] = RoundTo(full->strict_mrr, 6);
    json["full_strict_hits_at_1"] = RoundTo(full->strict_hits_at_1, 6);
    json["full_strict_hits_at_10"] = RoundTo(full->strict_hits_at_10, 6);
  }
  return JsonLine(json);
}

absl::StatusOr<ClassificationMetrics> EvaluateClassification(
    const GrailModel& model, const GraphView& graph, const RelationMap& relations,
    absl::Span<const Triple> facts, uint64_t seed, const GrailScoringOptions& scoring) {
  SeededRandom random(seed);
  std::vector<Triple> queries;
  std::vector<uint8_t> positive;
  for (const Triple& f : facts) {
    std::optional<Triple> negative = CorruptHeadOrTail(graph, f, random);
    if (!negative) continue;
    queries.push_back(f);
    positive.push_back(1);
    queries.push_back(*negative);
    positive.push_back(0);
  }
  absl::StatusOr<std::vector<float>> scores =
      ScoreGrailFacts(model, graph, relations, queries, scoring);
  if (!scores.ok()) return scores.status();
  ClassificationMetrics metrics;
  metrics.auc_pr = AveragePrecision(*scores, positive);
  metrics.auc_roc = RocAuc(*scores, positive);
  return metrics;
}

absl::StatusOr<EvaluationResult> EvaluateGrail(const GrailModel& model, const GraphView& graph,
                                               const RelationMap& relations,
                                               absl::Span<const Triple> test,
                                               const EvaluationOptions& options) {
  return EvaluateFacts(graph, test, options, [&](absl::Span<const Triple> facts) {
    return ScoreGrailFacts(model, graph, relations, facts, options.scoring);
  });
}

absl::StatusOr<EvaluationResult> EvaluateFacts(const GraphView& graph,
                                               absl::Span<const Triple> test,
                                               const EvaluationOptions& options,
                                               const FactScorer& score) {
  // Lay out every query first: per test fact, [positive, AUC negative, tail negatives...,
  // head negatives...]; then score them all in batches.
  SeededRandom random(options.seed);
  struct Layout {
    size_t positive, auc_negative, tails_begin, tails_end, heads_end;
    bool has_auc_negative;
  };
  std::vector<Layout> layout;
  std::vector<Triple> queries;
  for (const Triple& fact : test) {
    Layout l;
    l.positive = queries.size();
    queries.push_back(fact);
    std::optional<Triple> negative = CorruptHeadOrTail(graph, fact, random);
    l.has_auc_negative = negative.has_value();
    l.auc_negative = queries.size();
    if (negative) queries.push_back(*negative);
    l.tails_begin = queries.size();
    for (EntityId e : SampleReplacements(graph, fact, Side::kTail, options.negatives, random)) {
      queries.push_back({fact.head, fact.relation, e});
    }
    l.tails_end = queries.size();
    for (EntityId e : SampleReplacements(graph, fact, Side::kHead, options.negatives, random)) {
      queries.push_back({e, fact.relation, fact.tail});
    }
    l.heads_end = queries.size();
    layout.push_back(l);
  }
  const auto scoring_start = std::chrono::steady_clock::now();
  absl::StatusOr<std::vector<float>> scores = score(queries);
  if (!scores.ok()) return scores.status();
  const std::vector<float>& s = *scores;

  EvaluationResult result;
  result.subgraphs_scored = static_cast<int64_t>(queries.size());
  result.scoring_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - scoring_start).count();
  std::vector<float> auc_scores;
  std::vector<uint8_t> auc_labels;
  double lists = 0;
  for (const Layout& l : layout) {
    auc_scores.push_back(s[l.positive]);
    auc_labels.push_back(1);
    if (l.has_auc_negative) {
      auc_scores.push_back(s[l.auc_negative]);
      auc_labels.push_back(0);
    }
    const absl::Span<const float> all(s);
    for (absl::Span<const float> negatives :
         {all.subspan(l.tails_begin, l.tails_end - l.tails_begin),
          all.subspan(l.tails_end, l.heads_end - l.tails_end)}) {
      const double rank = RankAmong(s[l.positive], negatives);
      result.mrr += 1.0 / rank;
      result.hits_at_1 += rank <= 1 ? 1 : 0;
      result.hits_at_5 += rank <= 5 ? 1 : 0;
      result.hits_at_10 += rank <= 10 ? 1 : 0;
      lists += 1;
    }
  }
  result.n = static_cast<int64_t>(layout.size());
  result.auc_pr = AveragePrecision(auc_scores, auc_labels);
  if (lists > 0) {
    result.mrr /= lists;
    result.hits_at_1 /= lists;
    result.hits_at_5 /= lists;
    result.hits_at_10 /= lists;
  }
  return result;
}

absl::StatusOr<EvaluationResult> EvaluateGrailRuns(const GrailModel& model, const GraphView& graph,
                                                   const RelationMap& relations,
                                                   absl::Span<const Triple> test,
                                                   const EvaluationOptions& options, int runs) {
  return MeanOverRuns(runs, [&](int r) {
    EvaluationOptions run = options;
    run.seed = options.seed + static_cast<uint64_t>(r);
    return EvaluateGrail(model, graph, relations, test, run);
  });
}

absl::StatusOr<EvaluationResult> MeanOverRuns(
    int runs, const std::function<absl::StatusOr<EvaluationResult>(int run)>& evaluate) {
  if (runs < 1) return absl::InvalidArgumentError("runs must be at least 1");
  EvaluationResult mean;
  std::vector<double> auc;
  for (int r = 0; r < runs; ++r) {
    absl::StatusOr<EvaluationResult> one = evaluate(r);
    if (!one.ok()) return one.status();
    if (!mean.full) mean.full = one->full;
    auc.push_back(one->auc_pr);
    mean.auc_pr += one->auc_pr / runs;
    mean.mrr += one->mrr / runs;
    mean.hits_at_1 += one->hits_at_1 / runs;
    mean.hits_at_5 += one->hits_at_5 / runs;
    mean.hits_at_10 += one->hits_at_10 / runs;
    mean.n = one->n;
    mean.subgraphs_scored += one->subgraphs_scored;
    mean.scoring_seconds += one->scoring_seconds;
  }
  mean.runs = runs;
  mean.auc_pr_std = SampleStandardDeviation(auc);
  return mean;
}

}  // namespace grail
