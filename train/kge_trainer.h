// Training the KGE models (model/kge/kge_model.h) with the RotatE paper's recipe, as its code
// trains them (the implementation and hyperparameters GraIL's paper uses, Section 5.2):
//
// - Steps alternate between corrupting heads and corrupting tails. A step takes
//   `batch_size` training facts, each with `negatives` entities drawn uniformly that do not
//   complete a training fact in its place (filtered negatives).
// - Loss, per fact with score s and negative scores s'_j:
//     -log sigmoid(s) and -mean_j log sigmoid(-s'_j), each averaged over the step's facts and
//     halved; with self-adversarial weighting (`adversarial_alpha` a > 0) the negatives
//     weigh softmax(a s'), without gradient through the weights. GraIL's paper disables it
//     for its comparisons, so 0 (off) is the default.
// - With `subsampling` (the RotatE code's default), a fact weighs 1/sqrt(#(h, r) + #(t, r^-1))
//   in both averages, the counts starting at 3 (word2vec-style frequency subsampling).
// - `regularization` > 0 adds that weight times the cubed L3 norms of both embedding tables
//   (the code's choice for DistMult and ComplEx).
// - Adam; the learning rate drops tenfold after epoch `lr_decay_epoch` (the RotatE code drops
//   it after half of its steps; grail-kge-train's default is half of the epochs).
//
// Validation: filtered MRR against every entity on `valid`, after every `eval_every` epochs
// and after the last; the best model on it is the one returned.
//
// Checkpoints: with `checkpoint_dir`, every epoch ends by writing the parameters, Adam's
// state, the best model so far, the generators and the position; with `resume` a run
// continues from them: N epochs then a resume to M give what M epochs straight give (same
// seed, same thread count, same decay epoch).
#ifndef GRAIL_TRAIN_KGE_TRAINER_H_
#define GRAIL_TRAIN_KGE_TRAINER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/triple_file.h"
#include "model/kge/kge_model.h"
#include "train/training_report.h"

namespace grail {

struct KgeTrainOptions {
  KgeConfig model;
  int epochs = 100;
  int batch_size = 512;  // facts per step
  int negatives = 1024;  // per fact
  double learning_rate = 5e-5;
  int lr_decay_epoch = 0;     // > 0: a tenth of the rate after this epoch
  double regularization = 0;  // L3 weight; 0: none
  // > 0: self-adversarial weighting of the negatives, softmax(a * score) (RotatE's alpha;
  // the path family's adversarial_temperature T divides instead: softmax(score / T)).
  double adversarial_alpha = 0;
  bool subsampling = true;  // frequency weights of the facts; false: uniform
  int eval_every = 10;
  uint64_t seed = 0;
  int threads = 2;
  std::string device = "cpu";
  std::string checkpoint_dir;  // empty: no checkpoints
  bool resume = false;         // continue from checkpoint_dir's checkpoint, if there is one
};

// Recommended settings per model: the RotatE code's WN18RR configurations (dim, gamma,
// learning rate, regularization), self-adversarial weighting off as GraIL's paper runs them.
KgeTrainOptions RecipeFor(KgeKind kind);

// Trains on `train`: the model's entities are train.entities (which may hold entities of no
// training fact, as the RotatE code's vocabulary holds every entity of its splits: they keep
// their initial embedding and serve as negatives), its relations train.relations. Validates
// on `valid` (facts by name; those outside the vocabularies are skipped). Callbacks as
// TrainGrail's; a resumed run reports only the epochs it runs. Errors: INVALID_ARGUMENT for
// empty data, bad options or a checkpoint of another run; INTERNAL when a checkpoint cannot
// be written.
absl::StatusOr<std::unique_ptr<KgeModel>> TrainKge(
    const IndexedTriples& train, absl::Span<const NamedTriple> valid,
    const KgeTrainOptions& options,
    const std::function<void(const EpochReport&)>& on_epoch = nullptr,
    const std::function<void(const StepReport&)>& on_step = nullptr);

}  // namespace grail

#endif  // GRAIL_TRAIN_KGE_TRAINER_H_
