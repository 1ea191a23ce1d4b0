// A training run's checkpoint, shared by every family's trainer (train/grail_trainer.h,
// train/path_trainer.h, train/kge_trainer.h): after every epoch N, the parameters, the optimiser's
// state and the best parameters so far as `parameters-N.pt`, `optimizer-N.pt` and `best-N.pt`,
// LibTorch's CPU generator (edge dropout) as `torch-rng-N.pt`, each synced to the disk, then
// `state.json` — written to a temporary name, synced and renamed (the rename synced too), the
// commit point — naming N, the run's key and what the trainer adds (its metric, its own
// generators). A trainer may also checkpoint within an
// epoch, after step S of epoch N + 1 (files `<name>-N-stepS.pt`); state.json then adds how far
// that epoch got. A crash between two commits, of the process or of the machine, leaves the
// previous checkpoint whole; the files of every other checkpoint are removed after the commit.
//
// A checkpoint belongs to one run: Restore() refuses a state.json whose key differs from the
// caller's (other data or options), rather than resuming a different run.
#ifndef GRAIL_TRAIN_TRAINING_CHECKPOINT_H_
#define GRAIL_TRAIN_TRAINING_CHECKPOINT_H_

#include <torch/torch.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/seeded_random.h"
#include "eval/evaluation.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "train/training_report.h"

namespace grail {

// The model a training run returns: the best on validation (ties go to the later epoch).
// Validations on the schedule (every eval_every epochs) make the best that checkpoints
// keep; the run's last epoch, validated even off the schedule, may be returned but is not
// kept, so N epochs then a resume to M give what M epochs straight give.
class BestModel {
 public:
  // Starts as a copy of `parameters` with no metric.
  explicit BestModel(const std::vector<torch::Tensor>& parameters);

  // Offers the current parameters with their validation metric; returns whether they are
  // the best so far.
  bool Offer(double metric, bool scheduled, const std::vector<torch::Tensor>& parameters);
  // Leaves the returned model in `parameters` (unchanged if nothing was validated).
  void Apply(std::vector<torch::Tensor>& parameters) const;

  // What a checkpoint keeps: the best on the schedule and its metric (-1: none yet).
  std::vector<torch::Tensor>& tensors() { return tensors_; }
  const std::vector<torch::Tensor>& tensors() const { return tensors_; }
  double metric() const { return metric_; }
  void set_metric(double metric) { metric_ = metric; }

 private:
  std::vector<torch::Tensor> tensors_;
  double metric_ = -1;
  bool last_is_best_ = false;  // the off-schedule last epoch beat the scheduled best
};

// How far an epoch got: the next of its facts (in the epoch's order) to train on, and the
// steps, facts or queries and summed loss and seconds so far.
struct EpochProgress {
  int64_t next = 0;  // 0: the epoch has not started
  int64_t steps = 0;
  int64_t seen = 0;
  double loss = 0;
  double seconds = 0;
};

// Where a run stands at a checkpoint: epochs finished, training steps taken over the whole
// run at the end of them (a schedule that validates every N steps counts across epochs), and
// how far the next epoch got (a checkpoint within it).
struct TrainingPosition {
  int epoch = 0;
  int64_t steps = 0;
  EpochProgress within;
};

class TrainingCheckpoint {
 public:
  explicit TrainingCheckpoint(std::string dir) : dir_(std::move(dir)) {}

  // Writes the checkpoint at `at` (the end of epoch `at.epoch`, or within the next one when
  // `at.within.next` > 0): the position, the tensors, `best` with its metric, and the states
  // of the trainer's two generators (the epochs' order and the negatives). Within an epoch,
  // `order_random` is its state before the epoch drew its order, so a resume draws it again.
  absl::Status Write(const TrainingPosition& at, const std::string& run_key,
                     const std::vector<torch::Tensor>& parameters,
                     torch::optim::Optimizer& optimizer, const BestModel& best,
                     const SeededRandom& order_random, const SeededRandom& negative_random) const;

  // Loads the last checkpoint into `parameters` (in place), `optimizer`, `best`, the two
  // generators and LibTorch's CPU generator, and returns its position; epoch 0 (nothing
  // changed) if there is none. Errors: INVALID_ARGUMENT for a damaged checkpoint, one of
  // another run, or one whose tensors do not fit the model.
  absl::StatusOr<TrainingPosition> Restore(const std::string& run_key,
                                           std::vector<torch::Tensor>& parameters,
                                           torch::optim::Optimizer& optimizer, BestModel& best,
                                           SeededRandom& order_random,
                                           SeededRandom& negative_random) const;

  const std::string& dir() const { return dir_; }
  std::string StatePath() const { return dir_ + "/state.json"; }

 private:
  std::string File(const std::string& name, const TrainingPosition& at) const;

  const std::string dir_;
};

// The training data's part of a run key: a hash of the facts (ids, in order) and the counts
// of training and validation facts.
std::string TrainingDataFingerprint(const IndexedTriples& train, size_t valid_facts);

// The facts of `valid` a trainer validates on, as ids of `train`: those whose entities and
// relation it names, other than self-loops and facts of the training graph.
std::vector<Triple> ValidationFacts(const IndexedTriples& train, const StaticGraph& graph,
                                    absl::Span<const NamedTriple> valid);

}  // namespace grail

#endif  // GRAIL_TRAIN_TRAINING_CHECKPOINT_H_
