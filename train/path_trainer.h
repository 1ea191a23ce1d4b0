// Training the path-based scorer (model/path/path_model.h) as its paper trains it (NBFNet,
// Section 4 and its released configurations for these inductive splits).
//
// Each training fact (h, r, t) gives one query: the first half of a step's facts the tail
// query (h, r, ?) with answer t, the second half the head query (t, r^-1, ?) with answer h.
// Each query gets `negatives` strict negatives (entities that do not answer it in the
// training graph; its source among them only with `source_negatives`). Loss: binary cross-entropy
// with logits, the answer labelled 1 and the negatives 0; a query's negatives weigh 1/negatives
// each, or, with self-adversarial weighting, softmax(score / temperature) over them (no gradient
// through the weights); the answer weighs 1; the mean over queries. Adam. The predicted fact is
// never a message edge of its own query: with `remove_one_hop` every fact between the source and
// the answer or a negative is left out (either direction, any relation), otherwise the fact itself.
// A step's queries share one message graph (PathBatchBuilder::Build): a fact one query of the step
// leaves out is left out for every query of it, as the path model's paper trains. With
// `detached_walks`, small detached copies of the graph's walks (DetachedWalkCopies) join the
// message graph and the pool of negatives; they are never queried.
//
// Validation: filtered MRR against every entity on `valid`, after every `eval_every`
// epochs; the best model on it is the one returned.
//
// Checkpoints: with `checkpoint_dir`, every epoch ends by writing the parameters, Adam's
// state, the best model so far with its metric, the generators' state and the epoch, and a
// run with `resume` continues from them: N epochs then a resume to M give the model M epochs
// straight give (same seed, same thread count). With `checkpoint_every_steps` as well, every
// that many steps of an epoch write one too, with how far the epoch got, so a run killed in a
// long epoch loses at most that many steps: resumed, it trains the model a run never stopped
// trains, and reports the epoch's loss and seconds whole.
#ifndef GRAIL_TRAIN_PATH_TRAINER_H_
#define GRAIL_TRAIN_PATH_TRAINER_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "model/path/path_model.h"
#include "train/step_trace.h"
#include "train/training_report.h"

namespace grail {

struct PathTrainOptions {
  PathConfig model;
  int epochs = 20;
  int batch_size = 32;  // queries per pass
  // Passes per optimiser step: a step of batch_size * accumulate queries run as `accumulate`
  // forward and backward passes of batch_size, their gradients summed. The step's loss,
  // gradient and left-out facts are those of one batch of all its queries (up to float
  // summation order); its memory is one pass's. NBFNet's published runs train on 4 GPUs of
  // batch_size queries each: --batch-size 64 --accumulate 4 is their step on one device.
  int accumulate = 1;
  int negatives = 32;  // per query
  double learning_rate = 5e-3;
  double adversarial_temperature = 0;  // > 0: self-adversarial weighting of the negatives
  bool remove_one_hop = true;
  // true: a query's source is drawn as a negative like any other entity that does not answer
  // it, as NBFNet's trainer draws them (with 32 negatives among V entities, a query meets its
  // source about 32 / V of the times); false: never. Without it nothing in training scores the
  // source, whose state alone holds the query at the start, and the network may rank it above
  // the answer: a ranking that excludes the source (ours, the server's) does not see that,
  // the published figures' rank (eval/evaluation.h, FullRanking::strict_mrr) does.
  bool source_negatives = false;
  int eval_every = 1;
  uint64_t seed = 0;
  int threads = 2;
  std::string device = "cpu";
  // Steps whose inputs (batches) are made ahead, each on its own thread while the steps before
  // run. 0: 1 on the CPU, whose cores train; 4 on a GPU, whose steps outpace one thread.
  int input_threads = 0;
  // The layout of a step's batch (model/path/path_batch.h): kCheaper, by the cost rule; or
  // forced, to compare (a model without the fused operator has the disjoint one only).
  PathLayout layout = PathLayout::kCheaper;
  std::string checkpoint_dir;      // empty: no checkpoints
  bool resume = false;             // continue from checkpoint_dir's checkpoint, if there is one
  int checkpoint_every_steps = 0;  // > 0: a checkpoint within each epoch every N steps
  // A step's pass covers what its candidates' scores depend on (queries with targets,
  // model/path/path_batch.h); false: each source's whole neighbourhood, the same result slower.
  bool candidates_only = true;
  // > 0: this many detached walk copies per relation (DetachedWalkCopies) join the message
  // graph, their entities drawn as negatives only; validation stays on `train` as given.
  int detached_walks = 0;
  // > 0: the run stops after this many steps, reports the epoch so far (no validation) and
  // returns the model as it is: for measuring a step (bench/path_training.sh).
  int64_t max_steps = 0;
  // > 0: this call trains for at most about this many seconds (TrainingSchedule): the epoch
  // under way when they run out ends there, validated, and the best model is returned. A
  // checkpoint counts that epoch as done.
  double time_budget_seconds = 0;
  // A path: the run traces steps [trace.after, trace.after + trace.steps) of this call
  // (train/step_trace.h), writes the trace and stops there like max_steps.
  StepTraceOptions trace;
  // Non-empty: start from this archive (its network and parameters; `model` is ignored),
  // e.g. an imported ULTRA checkpoint to fine-tune. A model with a relation vocabulary must
  // have exactly the training graph's.
  std::string init;
};

// Trains on `train` (its vocabularies define the model's relations) and validates on
// `valid` (facts by name; those with entities or a relation absent from the training graph
// are skipped). Callbacks as TrainGrail's; a resumed run reports only the epochs it runs.
// Errors: INVALID_ARGUMENT for empty data or bad options, or a checkpoint of another run
// (other data or options); INTERNAL when a checkpoint cannot be written.
absl::StatusOr<std::unique_ptr<PathModel>> TrainPath(
    const IndexedTriples& train, absl::Span<const NamedTriple> valid,
    const PathTrainOptions& options,
    const std::function<void(const EpochReport&)>& on_epoch = nullptr,
    const std::function<void(const StepReport&)>& on_step = nullptr);

// Small components no training query reaches, copied from `graph`: for each relation with
// facts and k = 0 .. copies_per_relation - 1, a walk of up to 1 + k % 3 facts that starts at
// a uniformly drawn fact of the relation and grows by a uniformly drawn fact incident to a
// uniformly drawn entity already in it, copied onto fresh entities numbered from
// graph.num_entities() (a fact drawn twice is copied once). Without the reach mask every
// entity is scored on its own surroundings; a test graph may hold small components that the
// training graph lacks, and an unreached entity in a state training never saw can outrank
// every answer. As negatives these copies show the model such states. Deterministic in seed.
std::vector<Triple> DetachedWalkCopies(const StaticGraph& graph, int copies_per_relation,
                                       uint64_t seed);

// PNA's delta for `graph`: the mean over entities of log(degree + 1), degree counting every
// fact in either direction.
double MeanLogDegree(const IndexedTriples& graph);

}  // namespace grail

#endif  // GRAIL_TRAIN_PATH_TRAINER_H_
