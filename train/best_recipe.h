// The recommendation for a graph nobody has measured (grail-train --preset best): within one
// time budget, fine-tune ULTRA on the graph, train the path preset on it, fit their ensemble's
// rule (model/ensemble/ensemble_model.h), and keep whichever of the three ranks a held-out
// part of the validation facts best.
//
// The validation facts are split once, by the seed: the judge's part (half, at most
// `max_judge_facts`) is read only at the end, to decide; the rest (the fit's part) selects
// each member's epochs and fits the rule. Every candidate is judged the way the rule is
// fitted (eval/ensemble_evaluation.h, CollectValidationQueries): each held-out fact's tail and
// head query, filtered, its answer ranked among the candidates every member scores highest
// (CandidateMrr). The ensemble is kept only when it beats the better member by more than
// `margin`: on WordNet's splits ULTRA adds nothing the path model lacks, and an ensemble
// serves at the sum of its members' costs (docs/BENCHMARKS-log.md, "Ensembles").
//
// Time: ULTRA's recipe (one epoch) gets at most `ultra_share` of the budget, the path model
// what is left but `reserve_share`, which the fit and the judge use (their cost is a pass per
// member per query, of at most 2 * (max_fit_facts + max_judge_facts) queries). A training cut
// by its share keeps the best epoch it validated (TrainingSchedule::time_budget_seconds).
#ifndef GRAIL_TRAIN_BEST_RECIPE_H_
#define GRAIL_TRAIN_BEST_RECIPE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/json.h"
#include "graph/triple_file.h"
#include "model/ensemble/ensemble_model.h"
#include "train/path_trainer.h"
#include "train/training_report.h"

namespace grail {

struct BestRecipeOptions {
  PathTrainOptions ultra;  // ULTRA's recipe; `ultra.init` is the archive it fine-tunes
  PathTrainOptions path;   // the path preset's
  double time_budget_seconds = 2 * 3600;
  double ultra_share = 0.3;
  double reserve_share = 0.1;
  size_t max_judge_facts = 500;
  size_t max_fit_facts = 500;
  double margin = 0;  // full MRR the ensemble must gain over the better member
  uint64_t seed = 0;  // the validation facts' split and the rule's calibration
  int threads = 2;
};

// What the recipe did, for the report and for the model it keeps.
struct BestRecipeResult {
  struct Candidate {
    std::string name;  // "ultra", "path" or "ensemble"
    double judge_mrr = 0;
    double seconds = 0;  // its training (the ensemble: its fit)
    int epochs = 0;      // epochs trained (the last may have been cut)
  };
  std::vector<Candidate> candidates;  // ultra, path, ensemble
  std::string chosen;
  size_t fit_facts = 0, judge_facts = 0;  // validation facts in each part
  double seconds = 0;
  std::unique_ptr<EnsembleModel> ensemble;  // the two members and the fitted rule

  // Writes the chosen model: the ensemble's archive, or the chosen member's own.
  absl::Status Save(const std::string& path) const;
  int64_t num_parameters() const;
  // Every figure above, the rule's weights, and the budget.
  Json ToJson(double time_budget_seconds) const;

 private:
  // The member kept, or null when the ensemble is.
  const PathModel* ChosenMember() const;
};

// The candidate kept: the member the judge ranks best (the first of equals: ULTRA, which needs
// no vocabulary), unless the ensemble beats it by more than `margin`.
std::string ChooseBest(absl::Span<const BestRecipeResult::Candidate> candidates, double margin);

// Runs the recipe on `train` (`train_facts` by name, the same facts) with `valid`. Epoch reports
// of both trainings go to `on_epoch` after `on_phase` names the phase and its epochs (0 for the
// fit). Errors: INVALID_ARGUMENT for bad options, fewer than 4 usable validation facts, or an
// `ultra.init` that is not ULTRA's; the trainers' and the fit's errors.
absl::StatusOr<BestRecipeResult> RunBestRecipe(
    const IndexedTriples& train, absl::Span<const NamedTriple> train_facts,
    absl::Span<const NamedTriple> valid, const BestRecipeOptions& options,
    const std::function<void(const std::string&, int)>& on_phase = nullptr,
    const std::function<void(const EpochReport&)>& on_epoch = nullptr,
    const std::function<void(const StepReport&)>& on_step = nullptr);

}  // namespace grail

#endif  // GRAIL_TRAIN_BEST_RECIPE_H_
