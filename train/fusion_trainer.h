// Late fusion's training, as the GraIL paper's ensembles: classifiers over the members'
// scores (model/fusion/), fitted on validation facts and their negatives.
#ifndef GRAIL_TRAIN_FUSION_TRAINER_H_
#define GRAIL_TRAIN_FUSION_TRAINER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/graph_view.h"
#include "graph/relation_map.h"
#include "model/fusion/fusion_model.h"
#include "model/fusion/linear_fusion.h"

namespace grail {

// Late fusion's training data: every validation fact (ids of the graph, not facts of it) with
// one negative (head or tail replaced, drawn from the seed as the evaluation draws them), each
// a row of the members' scores (FusionModel::MemberScores: GraIL's first, NaN where a member
// does not know the fact).
struct FusionRows {
  std::vector<std::vector<double>> scores;  // fact, its negative, fact, its negative, ...
  std::vector<uint8_t> is_true;             // 1, 0, 1, 0, ...

  // The rows of the given columns only (indices into each row), keeping the fact-negative
  // pairs whose scores in those columns are all known: a classifier's data over them.
  FusionRows Restricted(absl::Span<const size_t> columns) const;
};

// Errors: INVALID_ARGUMENT if no validation fact has a negative; scoring errors.
absl::StatusOr<FusionRows> ValidationRows(const FusionModel& model, const GraphView& graph,
                                          const RelationMap& relations,
                                          const FusionVocabulary& vocabulary,
                                          absl::Span<const Triple> valid, uint64_t seed,
                                          const GrailScoringOptions& scoring);

// Classifiers fitted on validation facts, and how each member and the fusion separate them.
struct FusionFit {
  LinearFusion fused;       // over the facts every member knows
  LinearFusion grail_only;  // over every fact
  int64_t facts = 0;        // validation facts used, each with one negative
  int64_t fused_facts = 0;  // of which every member knows both it and its negative
  // AUC-PR on the facts every member knows, each with its negative: per member (GraIL
  // first), then the fused classifier's (on the data it was fitted to).
  std::vector<double> member_auc_pr;
  double fused_auc_pr = 0;
};

// Late fusion's training, as the paper's: logistic regression separates the validation facts
// from their negatives (ValidationRows), over every member's score where every member knows
// both the fact and its negative, and over GraIL's alone on all of them. Errors: INVALID_ARGUMENT
// if no validation fact can be used, or the members know none of them; scoring errors.
absl::StatusOr<FusionFit> FitFusion(const FusionModel& model, const GraphView& graph,
                                    const RelationMap& relations,
                                    const FusionVocabulary& vocabulary,
                                    absl::Span<const Triple> valid, uint64_t seed,
                                    const GrailScoringOptions& scoring);

}  // namespace grail

#endif  // GRAIL_TRAIN_FUSION_TRAINER_H_
