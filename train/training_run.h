// One training loop for every family: Adam over the parameters, the best model on
// validation, the generators of the epochs' order and of the negatives, the epochs and their
// steps, validation on a schedule of epochs or steps, a checkpoint after every epoch (and
// every N steps within one), a profiled window of steps, and the reports — so that a run
// resumed wherever it stopped gives the model the uninterrupted run gives. A family supplies
// what differs (TrainingFamily): an epoch's steps over the order the loop draws, each a batch,
// a forward, a backward and the optimizer's step; and its validation, which draws from
// generators of its own, never from the run's.
#ifndef GRAIL_TRAIN_TRAINING_RUN_H_
#define GRAIL_TRAIN_TRAINING_RUN_H_

#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/torch.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/seeded_random.h"
#include "eval/evaluation.h"
#include "train/step_trace.h"
#include "train/training_checkpoint.h"
#include "train/training_report.h"

namespace grail {

// What one training step did, as its family reports it to the loop.
struct StepOutcome {
  int64_t positives = 0;   // what it trained on: facts (GraIL, KGE) or queries (path)
  double summed_loss = 0;  // its loss summed over them (an epoch reports the mean per positive)
  double loss = 0;         // its loss per positive, as StepReport gives it
  int64_t end = 0;         // how far into the epoch's order its examples came from

  // A step of `positives` whose loss per positive was `loss`.
  static StepOutcome OfMean(int64_t positives, double loss, int64_t end) {
    return {positives, loss * static_cast<double>(positives), loss, end};
  }
};

// One epoch's steps, made by a family over the epoch's order.
class EpochSteps {
 public:
  virtual ~EpochSteps() = default;
  // Runs the next step (its batch, forward, backward and the run's optimizer step) and says
  // what it did; nullopt once the order is done. LibTorch's errors may be thrown.
  virtual absl::StatusOr<std::optional<StepOutcome>> Next() = 0;
  // Where the family draws negatives ahead of the steps it has run: the negatives' generator
  // as those steps left it, which a checkpoint within the epoch holds (nullopt: the run's
  // generator is as they left it).
  virtual std::optional<SeededRandom> NegativesAfterLastStep() const { return std::nullopt; }
};

// What a family supplies to the loop (TrainingRun::Train).
class TrainingFamily {
 public:
  virtual ~TrainingFamily() = default;
  // How many examples (positives) an epoch's order permutes.
  virtual size_t examples() const = 0;
  // Epoch `epoch`'s steps over `order`, starting at position `next` (not 0 only after a
  // checkpoint within the epoch); `run_steps`: the steps the run made before this epoch.
  virtual absl::StatusOr<std::unique_ptr<EpochSteps>> Epoch(int epoch,
                                                            const std::vector<uint32_t>& order,
                                                            int64_t next, int64_t run_steps) = 0;
  // Validates the parameters as they are into `report` and offers them to the best model
  // (TrainingRun::Offer) with `scheduled`; `step`: the run's steps so far.
  virtual absl::Status Validate(EpochReport& report, bool scheduled, int64_t step) = 0;
};

// The loop's schedule.
struct TrainingSchedule {
  int epochs = 1;
  int eval_every = 1;  // validate after every eval_every-th epoch and after the last
  // > 0: validate after every eval_every_steps-th step of the run instead (counted across
  // epochs), and not at the end of an epoch.
  int64_t eval_every_steps = 0;
  // > 0: a checkpoint within each epoch after every N of its steps (a family that draws
  // ahead says how far through NegativesAfterLastStep).
  int64_t checkpoint_every_steps = 0;
  // > 0: stop after that many steps of an epoch, reporting it unvalidated, and return the
  // parameters as they are (a benchmark's run); the profiled window stops the run likewise.
  int64_t max_steps = 0;
  // > 0: the run's time budget in seconds, counted from Train's call and checked after each
  // step (so a run makes one step at least). The epoch under way when it runs out ends there
  // (validated, checkpointed and reported as an epoch, `cut`) and no other starts; the
  // parameters are the best model's, as at the end of any run.
  double time_budget_seconds = 0;
  StepTraceOptions trace;
  bool cuda = false;  // the trace profiles the GPU's kernels too
};

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

  // Trains `family` from the run's position (Resume) to `schedule.epochs`: each epoch draws
  // its order, runs the family's steps, validates on the schedule, checkpoints and reports
  // (`on_epoch`, `on_step`; either may be empty). At the end the parameters are the best
  // model's; a run stopped by max_steps or the trace leaves them as they are.
  absl::Status Train(TrainingFamily& family, const TrainingSchedule& schedule,
                     const std::function<void(const EpochReport&)>& on_epoch,
                     const std::function<void(const StepReport&)>& on_step);

  torch::optim::Adam& optimizer() { return optimizer_; }
  const std::vector<torch::Tensor>& parameters() const { return parameters_; }
  SeededRandom& order_random() { return order_random_; }
  SeededRandom& negative_random() { return negative_random_; }
  const TrainingPosition& position() const { return done_; }

 private:
  // Ends epoch `report.epoch` (`report` holds what happened during it: positives, any
  // validations), which took `steps` steps with a summed loss of `total_loss`: validation on
  // the schedule, then the checkpoint. Returns the report with its loss and its time since
  // `start`.
  absl::StatusOr<EpochReport> EndEpoch(EpochReport report, const TrainingSchedule& schedule,
                                       TrainingFamily& family, int64_t steps, double total_loss,
                                       std::chrono::steady_clock::time_point start);

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
// valid_mrr, offered as the best model's metric.
absl::Status ValidateMrr(TrainingRun& run, EpochReport& report, bool scheduled, size_t valid_facts,
                         const std::function<absl::StatusOr<EvaluationResult>()>& evaluate);

}  // namespace grail

#endif  // GRAIL_TRAIN_TRAINING_RUN_H_
