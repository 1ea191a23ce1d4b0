// One training driver for every family: Adam over the parameters, the best model on
// validation, the generators of the epochs' order and of the negatives, and a checkpoint after
// every epoch (and within one, when the family asks), so that a run resumed wherever it stopped
// gives the model the uninterrupted run gives. The family supplies its steps (its loop over
// the epoch's order) and its validation; validations draw from generators of their own, never
// from the run's.
#ifndef GRAIL_TRAIN_TRAINING_RUN_H_
#define GRAIL_TRAIN_TRAINING_RUN_H_

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/seeded_random.h"
#include "eval/evaluation.h"
#include "train/training_checkpoint.h"
#include "train/training_report.h"

namespace grail {

class TrainingRun {
 public:
  // `negative_salt` tells the family's negatives generator from the order's (both seeded by
  // `seed`). An empty `checkpoint_dir` writes no checkpoints.
  TrainingRun(std::vector<torch::Tensor> parameters, const torch::optim::AdamOptions& adam,
              uint64_t seed, uint64_t negative_salt, const std::string& checkpoint_dir,
              std::string run_key);

  // Continues from the last checkpoint (position() says where; epoch 0 if there is none).
  // After a checkpoint within an epoch, order_random() is as that epoch began: the trainer
  // draws the epoch's order again and continues from position().within.
  absl::Status Resume();

  // Checkpoints within the epoch after position().epoch, which has got as far as `progress`
  // and drew its order from `order_at_start` (order_random() as the epoch began). Nothing
  // without a checkpoint directory.
  absl::Status CheckpointWithin(const EpochProgress& progress, const SeededRandom& order_at_start);

  // Offers the parameters as they are now to the best model with their validation `metric`
  // (`scheduled`: see BestModel); returns whether they are the best so far.
  bool Offer(double metric, bool scheduled) { return best_.Offer(metric, scheduled, parameters_); }

  // A family's validation at the end of an epoch: fills the report with its figures and offers
  // the parameters (Offer) with `scheduled` (whether the epoch is on the schedule).
  using Validation = std::function<absl::Status(EpochReport& report, bool scheduled)>;

  // Ends epoch `report.epoch` of `epochs` (`report` holds what the family filled during it:
  // positives, any validations), which took `steps` steps with a summed loss of `total_loss`:
  // after every `eval_every` epochs and after the last, `validate` (when set); then the
  // checkpoint. Returns the report with its loss and its time since `start`.
  absl::StatusOr<EpochReport> EndEpoch(EpochReport report, int epochs, int eval_every,
                                       int64_t steps, double total_loss, const Validation& validate,
                                       std::chrono::steady_clock::time_point start);

  // Leaves the model the run returns (the best) in the parameters.
  void Finish() { best_.Apply(parameters_); }

  torch::optim::Adam& optimizer() { return optimizer_; }
  SeededRandom& order_random() { return order_random_; }
  SeededRandom& negative_random() { return negative_random_; }
  const TrainingPosition& position() const { return done_; }

 private:
  // TorchScript's executor runs a module's first call as written (autograd's backward) and
  // later calls as an optimised graph whose backward is its own formulas: their gradients
  // differ in the last bits, so a resumed run, whose first step is a first call where the
  // run it repeats had a later one, would drift apart. The run's thread trains with the
  // graph as written at every step, on any device: no slower in a step on the CPU or on an
  // H100, and it spares the optimiser's warm-up (docs/training.md).
  torch::jit::GraphOptimizerEnabledGuard as_written_{false};
  std::vector<torch::Tensor> parameters_;
  torch::optim::Adam optimizer_;
  SeededRandom order_random_;
  SeededRandom negative_random_;
  BestModel best_;
  TrainingPosition done_;
  const TrainingCheckpoint checkpoint_;
  const std::string run_key_;
};

// The validation of the families that keep the best model on filtered MRR (path, KGE): the
// MRR of `evaluate` (0 without validation facts, when it is not called) as the epoch's
// valid_mrr and the best model's metric.
TrainingRun::Validation MrrValidation(TrainingRun& run, size_t valid_facts,
                                      std::function<absl::StatusOr<EvaluationResult>()> evaluate);

}  // namespace grail

#endif  // GRAIL_TRAIN_TRAINING_RUN_H_
