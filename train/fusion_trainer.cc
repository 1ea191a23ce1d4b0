#include "train/fusion_trainer.h"

#include <cmath>
#include <optional>
#include <utility>

#include "common/seeded_random.h"
#include "eval/ranking_metrics.h"
#include "graph/negative_sampling.h"

namespace grail {

absl::StatusOr<FusionRows> ValidationRows(const FusionModel& model, const GraphView& graph,
                                          const RelationMap& relations,
                                          const FusionVocabulary& vocabulary,
                                          absl::Span<const Triple> valid, uint64_t seed,
                                          const GrailScoringOptions& scoring) {
  SeededRandom random(seed);
  std::vector<Triple> rows;  // fact, negative, fact, negative, ...
  for (const Triple& f : valid) {
    std::optional<Triple> negative = CorruptHeadOrTail(graph, f, random);
    if (!negative) continue;
    rows.push_back(f);
    rows.push_back(*negative);
  }
  if (rows.empty()) return absl::InvalidArgumentError("no validation fact has a negative");
  absl::StatusOr<std::vector<std::vector<double>>> columns =
      model.MemberScores(graph, relations, vocabulary, rows, scoring);
  if (!columns.ok()) return columns.status();
  FusionRows out;
  out.scores = *std::move(columns);
  for (size_t i = 0; i < rows.size(); ++i) out.is_true.push_back(i % 2 == 0 ? 1 : 0);
  return out;
}

FusionRows FusionRows::Restricted(absl::Span<const size_t> columns) const {
  FusionRows out;
  for (size_t i = 0; i + 1 < scores.size(); i += 2) {
    bool pair_known = true;
    for (size_t k : {i, i + 1}) {
      for (size_t c : columns) pair_known = pair_known && !std::isnan(scores[k][c]);
    }
    if (!pair_known) continue;
    for (size_t k : {i, i + 1}) {
      std::vector<double>& row = out.scores.emplace_back();
      for (size_t c : columns) row.push_back(scores[k][c]);
      out.is_true.push_back(is_true[k]);
    }
  }
  return out;
}

absl::StatusOr<FusionFit> FitFusion(const FusionModel& model, const GraphView& graph,
                                    const RelationMap& relations,
                                    const FusionVocabulary& vocabulary,
                                    absl::Span<const Triple> valid, uint64_t seed,
                                    const GrailScoringOptions& scoring) {
  absl::StatusOr<FusionRows> rows =
      ValidationRows(model, graph, relations, vocabulary, valid, seed, scoring);
  if (!rows.ok()) return rows.status();
  std::vector<size_t> every(1 + model.kge().size());
  for (size_t c = 0; c < every.size(); ++c) every[c] = c;
  const FusionRows all = rows->Restricted({0});
  const FusionRows known_rows = rows->Restricted(every);
  const std::vector<std::vector<double>>& known = known_rows.scores;
  const std::vector<uint8_t>& known_labels = known_rows.is_true;
  FusionFit fit;
  fit.facts = static_cast<int64_t>(rows->scores.size() / 2);
  fit.fused_facts = static_cast<int64_t>(known.size() / 2);
  if (known.empty()) {
    return absl::InvalidArgumentError(
        "the KGE models know none of the validation facts' entities and relations");
  }
  absl::StatusOr<LinearFusion> grail_only = FitLogistic(all.scores, all.is_true);
  if (!grail_only.ok()) return grail_only.status();
  absl::StatusOr<LinearFusion> fused = FitLogistic(known, known_labels);
  if (!fused.ok()) return fused.status();
  fit.grail_only = *std::move(grail_only);
  fit.fused = *std::move(fused);
  std::vector<float> scores(known.size());
  for (size_t m = 0; m < known[0].size(); ++m) {
    for (size_t i = 0; i < known.size(); ++i) scores[i] = static_cast<float>(known[i][m]);
    fit.member_auc_pr.push_back(AveragePrecision(scores, known_labels));
  }
  for (size_t i = 0; i < known.size(); ++i)
    scores[i] = static_cast<float>(fit.fused.Logit(known[i]));
  fit.fused_auc_pr = AveragePrecision(scores, known_labels);
  return fit;
}

}  // namespace grail
