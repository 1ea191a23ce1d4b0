// A challenger to the served model: the champion's archive fine-tuned on the live graph's
// facts (an export, in order of addition), and both judged on the newest facts, which neither
// saw, the way the benchmarks rank (grail-tune; docs/operations.md, "Fine-tuning on the live
// graph").
//
// The facts split by age (SplitByAge): the judge is the newest facts that can be ranked on the
// graph before them, the validation facts the newest before those (they select the
// challenger's epoch), and the rest train it. The judge ranks each of its facts (tail and head
// queries, filtered, against every entity) on the graph of everything but the judge, for the
// champion and the challenger alike. Only
// path-family archives are fine-tuned: ULTRA's by ULTRA's recipe, a path preset's by the path
// preset's step at ULTRA's fine-tuning rate (FineTuneRecipe).
#ifndef GRAIL_TRAIN_CHALLENGER_H_
#define GRAIL_TRAIN_CHALLENGER_H_

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/json.h"
#include "eval/evaluation.h"
#include "graph/triple_file.h"
#include "model/path/path_model.h"
#include "train/path_trainer.h"
#include "train/training_report.h"

namespace grail {

// ULTRA's fine-tuning recipe (its paper's): one epoch of batches of 16 at learning rate 5e-4,
// self-adversarial temperature 1, only the predicted fact left out of its graph. Everything
// about the run itself (seed, threads, device, budget, init, checkpoints) is kept from `base`.
PathTrainOptions UltraFineTuneRecipe(PathTrainOptions base);

// How `champion` is fine-tuned: ULTRA's recipe for an open-vocabulary (ULTRA) archive, for up
// to 5 epochs rather than 1 (a live graph of a few thousand facts is a hundred steps an epoch;
// on fb237_v1's _ind graph one epoch served 0.1 points worse, five 0.9 better), the validation
// keeping the best; for a path preset's, the path preset's step (batches of 64, temperature 0.5, no
// one-hop removal; tools/training_presets.cc) for up to 20 epochs at ULTRA's fine-tuning rate,
// 5e-4, a tenth of the rate it trains at from scratch: a trained network moved gently. The run's
// own settings kept from `base`, `init` included.
PathTrainOptions FineTuneRecipe(const PathModel& champion, PathTrainOptions base);

// Where each fact of `facts` (in order of addition) goes: indices into it, in order. The judge
// is the newest window [c, n) that holds `judge` facts rankable on the graph before it (both
// entities named by a fact before c, and not one entity twice), those facts (the newest
// `judge` of them); the window's other facts, which bring entities new to the graph and so
// cannot be ranked, go to training, as do those of the validation window, found the same way
// before c with `valid`. A window reaches back at most `max_window_share` of the facts, and
// then holds what rankable facts it found. `moved_to_train` counts the windows' facts that
// went to training.
struct AgeSplit {
  std::vector<uint32_t> train, valid, judge;
  size_t moved_to_train = 0;
};
AgeSplit SplitByAge(absl::Span<const NamedTriple> facts, size_t judge, size_t valid,
                    double max_window_share);

struct ChallengeOptions {
  // The fine-tuning; `recipe.init` is the champion's archive. Set by FineTuneRecipe unless the
  // caller overrides it.
  PathTrainOptions recipe;
  size_t judge_facts = 500;
  size_t valid_facts = 500;
  // Neither held-out part takes more than this share of the facts, and neither window reaches
  // back more than max_window_share of them (SplitByAge).
  double max_holdout_share = 0.1;
  double max_window_share = 0.25;
  int eval_threads = 2;
};

struct Challenge {
  size_t train_facts = 0, valid_facts = 0, judge_facts = 0;
  // Judge facts the evaluation could not rank after all (a fact the graph before it holds).
  size_t judge_unrankable = 0;
  // Facts of the held-out windows that went to training (SplitByAge).
  size_t moved_to_train = 0;
  size_t unknown_relation = 0;            // facts of relations a closed-vocabulary champion lacks
  EvaluationResult champion, challenger;  // on the judge; `full` holds the full ranking
  int epochs = 0;                         // trained (the last may have been cut)
  bool finite = true;                     // false: the challenger's parameters hold NaN or infinity
  double train_seconds = 0, judge_seconds = 0;
  std::unique_ptr<PathModel> model;  // the challenger

  double champion_mrr() const { return champion.full ? champion.full->mrr : 0; }
  // 0 for a challenger that is not finite: it is never better.
  double challenger_mrr() const { return finite && challenger.full ? challenger.full->mrr : 0; }
  // challenger_mrr() - champion_mrr(), and the standard error of that difference over the
  // judge's ranking lists, paired (both models rank the same lists): the sample standard
  // deviation of the per-list differences of reciprocal rank over the square root of their
  // number. 0 without two lists.
  double gain() const { return challenger_mrr() - champion_mrr(); }
  double gain_standard_error() const;
  // The promotion rule: a finite challenger whose gain exceeds `margin` and `z` standard errors
  // (one-sided: z = 2 leaves about 2% to chance for a challenger no better than the champion).
  bool Beats(double margin, double z) const {
    return finite && gain() > margin && gain() > z * gain_standard_error();
  }
  // Every figure above, as the tune report's "judge" object.
  Json ToJson() const;
};

// Fine-tunes `champion` (loaded from `options.recipe.init`) on `facts` (in order of addition,
// as an export gives them) and judges both. Errors: INVALID_ARGUMENT for a champion that is
// not a path-family archive; FAILED_PRECONDITION when too few facts are left to train on or to
// judge with (at least 1 judge fact that can be ranked and 10 training facts); the trainer's
// and the evaluation's errors.
absl::StatusOr<Challenge> RunChallenge(
    absl::Span<const NamedTriple> facts, const ChallengeOptions& options,
    const std::function<void(const EpochReport&)>& on_epoch = nullptr);
// The same with the champion already loaded (from `options.recipe.init`, which the trainer
// still starts from).
absl::StatusOr<Challenge> RunChallenge(
    absl::Span<const NamedTriple> facts, const PathModel& champion, const ChallengeOptions& options,
    const std::function<void(const EpochReport&)>& on_epoch = nullptr);

}  // namespace grail

#endif  // GRAIL_TRAIN_CHALLENGER_H_
