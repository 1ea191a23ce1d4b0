// Training GraIL (paper Section 3.4 and the reference defaults).
//
// Every training fact is a positive; each gets one negative (head or tail replaced by a
// uniform entity, not a fact, not a self-loop). Loss: sum over the batch of
// max(0, score(neg) - score(pos) + margin). Adam with L2 weight decay, gradient-norm clip,
// valid AUC-PR every `eval_every` epochs, and the best model on valid is the one returned.
// The reference code's schedule, which differs from the paper's appendix, is available as
// options (eval_every_steps, select_metric, clip_norm = 0, dropout_off_after_eval,
// fixed_negatives).
// Subgraph extraction for the next batches runs on a producer thread while the model
// trains on the current one. Deterministic per seed (for a fixed thread count).
#ifndef GRAIL_TRAIN_GRAIL_TRAINER_H_
#define GRAIL_TRAIN_GRAIL_TRAINER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/triple_file.h"
#include "model/grail/grail_model.h"
#include "train/training_report.h"

namespace grail {

// What a validation's figure the best model is chosen by.
enum class SelectMetric { kAucPr, kAucRoc };

struct GrailTrainOptions {
  GrailConfig model;
  int epochs = 50;
  int batch_size = 16;  // positives per step (each with its negative)
  double learning_rate = 0.01;
  double l2 = 5e-4;
  double margin = 10;
  double clip_norm = 1000;  // gradient-norm clip; 0: none (the reference code never clips)
  int eval_every = 3;       // epochs between valid evaluations (the last epoch is always one)
  // The reference code's schedule (kkteru/grail, train.py and managers/trainer.py):
  // - eval_every_steps > 0 validates after every eval_every_steps-th step of the run, counted
  //   across epochs, instead of every eval_every epochs (the reference: 455). Nothing else
  //   validates, not even the last step; a run that never validated returns its last
  //   parameters.
  // - select_metric: the figure the best model is chosen by (the reference: ROC-AUC).
  // - dropout_off_after_eval: after a validation, the rest of the epoch trains without edge
  //   dropout (the reference's evaluator leaves the model in eval mode until the next epoch
  //   starts; ~28% of steps on fb237_v1 at 455).
  // - fixed_negatives: each positive's negative is drawn once, before the first epoch, and
  //   reused every epoch (the reference draws them once, into its database).
  int64_t eval_every_steps = 0;
  SelectMetric select_metric = SelectMetric::kAucPr;
  bool dropout_off_after_eval = false;
  bool fixed_negatives = false;
  uint64_t seed = 0;
  // Remove each positive from the graph while extracting its subgraph (it comes back only
  // as the target edge). Off by default, as in the reference implementation.
  bool exclude_target_edge = false;
  int threads = 2;  // LibTorch's kernels; a producer thread extracts alongside
  std::string device = "cpu";
  // Checkpoints (train/training_checkpoint.h): with a directory, every epoch ends by writing
  // the parameters, Adam's state, the best model so far with its metric, the generators'
  // state (negatives, order, edge dropout) and the epoch; with `resume` a run continues from
  // the directory's checkpoint, if any: N epochs then a resume to M give the model M epochs
  // straight give (same seed, same thread count, CPU).
  std::string checkpoint_dir;  // empty: no checkpoints
  bool resume = false;
  // Early fusion: each entity's fixed features (model.node_feature_dim must be their width);
  // training entities without a row get zeros and the flag bit.
  std::shared_ptr<const NodeFeatures> node_features;
};

// Trains on `train` (its vocabularies define the model's relations) and validates on
// `valid` (facts by name: those whose entities or relation are absent from the training
// graph are skipped). `on_epoch` is called after every epoch, `on_step` after every step
// (on the calling thread; keep it cheap); a resumed run reports only the epochs it runs.
// Errors: INVALID_ARGUMENT for empty data or bad options, or a checkpoint of another run
// (other data or options); INTERNAL when a checkpoint cannot be written.
absl::StatusOr<std::unique_ptr<GrailModel>> TrainGrail(
    const IndexedTriples& train, absl::Span<const NamedTriple> valid,
    const GrailTrainOptions& options,
    const std::function<void(const EpochReport&)>& on_epoch = nullptr,
    const std::function<void(const StepReport&)>& on_step = nullptr);

}  // namespace grail

#endif  // GRAIL_TRAIN_GRAIL_TRAINER_H_
