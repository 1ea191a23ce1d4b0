#include "train/grail_trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <deque>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/seeded_random.h"
#include "eval/evaluation.h"
#include "graph/negative_sampling.h"
#include "graph/static_graph.h"
#include "model/core/runtime.h"
#include "model/grail/enclosing_subgraph.h"
#include "model/grail/grail_module.h"
#include "train/training_checkpoint.h"
#include "train/training_run.h"

namespace grail {
namespace {

// One training step's input: graphs [0, positives) are the positives, graph positives + i is
// the negative of positive i.
struct TrainingBatch {
  SubgraphBatch subgraphs;
  int64_t positives = 0;
};

// A bounded single-producer / single-consumer queue of prepared batches.
class BatchQueue {
 public:
  explicit BatchQueue(size_t capacity) : capacity_(capacity) {}

  void Push(TrainingBatch batch) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &BatchQueue::HasRoom));
    items_.push_back(std::move(batch));
  }
  void Close(absl::Status status) {
    absl::MutexLock lock(&mu_);
    closed_ = true;
    status_ = std::move(status);
  }
  // Returns false once the producer closed the queue and it is drained.
  bool Pop(TrainingBatch* batch) {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(this, &BatchQueue::CanPop));
    if (items_.empty()) return false;
    *batch = std::move(items_.front());
    items_.pop_front();
    return true;
  }
  absl::Status status() {
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return items_.size() < capacity_; }
  bool CanPop() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !items_.empty() || closed_; }

  const size_t capacity_;
  absl::Mutex mu_;
  std::deque<TrainingBatch> items_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// Draws negatives (or takes positive i's from fixed[i], when there are fixed ones) and
// extracts subgraphs for one epoch, in `order`, into `queue`.
void ProduceEpoch(const StaticGraph& graph, const std::vector<Triple>& positives,
                  const std::vector<std::optional<Triple>>& fixed,
                  const std::vector<uint32_t>& order, const GrailTrainOptions& options,
                  const std::vector<int32_t>& feature_rows, SeededRandom& negatives,
                  BatchQueue& queue) {
  SubgraphExtractor extractor(options.model.extraction());
  EnclosingSubgraph subgraph;
  std::vector<Triple> batch_positives, batch_negatives;
  for (size_t begin = 0; begin < order.size(); begin += options.batch_size) {
    const size_t end = std::min(order.size(), begin + options.batch_size);
    batch_positives.clear();
    batch_negatives.clear();
    for (size_t i = begin; i < end; ++i) {
      const Triple& positive = positives[order[i]];
      const std::optional<Triple> negative =
          fixed.empty() ? CorruptHeadOrTail(graph, positive, negatives) : fixed[order[i]];
      if (!negative) continue;  // a fact with no valid corruption teaches nothing
      batch_positives.push_back(positive);
      batch_negatives.push_back(*negative);
    }
    if (batch_positives.empty()) continue;
    TrainingBatch batch;
    batch.positives = static_cast<int64_t>(batch_positives.size());
    for (const std::vector<Triple>* facts : {&batch_positives, &batch_negatives}) {
      const bool hide = facts == &batch_positives && options.exclude_target_edge;
      for (const Triple& f : *facts) {
        absl::Status status = extractor.Extract(graph, f.head, f.relation, f.tail, hide, &subgraph);
        if (!status.ok()) {
          queue.Close(status);
          return;
        }
        if (!feature_rows.empty()) AttachNodeFeatures(feature_rows, &subgraph);
        batch.subgraphs.Add(subgraph, f.relation, {});
      }
    }
    queue.Push(std::move(batch));
  }
  queue.Close(absl::OkStatus());
}

absl::Status ValidateOptions(const GrailTrainOptions& o) {
  if (o.epochs < 1) return absl::InvalidArgumentError("epochs must be at least 1");
  if (o.batch_size < 1) return absl::InvalidArgumentError("batch size must be at least 1");
  if (o.eval_every < 1) return absl::InvalidArgumentError("eval_every must be at least 1");
  if (o.eval_every_steps < 0) {
    return absl::InvalidArgumentError("eval_every_steps must be at least 0");
  }
  if (!(o.clip_norm >= 0)) return absl::InvalidArgumentError("clip must be >= 0 (0: none)");
  if (!(o.learning_rate > 0)) return absl::InvalidArgumentError("learning rate must be > 0");
  if (o.threads < 1) return absl::InvalidArgumentError("threads must be at least 1");
  if (o.resume && o.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("resume needs a checkpoint directory");
  }
  return absl::OkStatus();
}

// What identifies a run: a checkpoint of another run must not be resumed.
std::string RunKey(const GrailTrainOptions& o, const IndexedTriples& train, size_t valid_facts) {
  const GrailConfig& c = o.model;
  std::string key = absl::StrCat(
      TrainingDataFingerprint(train, valid_facts), "|hops=", c.hops, "|cap=", c.max_nodes_per_hop,
      "|enclosing=", c.enclosing, "|labels=", c.node_labels, "|attention=", c.attention,
      "|layers=", c.num_layers, "|dim=", c.dim, "|bases=", c.num_bases,
      "|relation_dim=", c.relation_dim, "|dropout=", c.edge_dropout,
      "|zero_without_in_edges=", c.zero_without_in_edges, "|batch=", o.batch_size,
      "|lr=", o.learning_rate, "|l2=", o.l2, "|margin=", o.margin, "|clip=", o.clip_norm,
      "|eval_every=", o.eval_every, "|exclude_target=", o.exclude_target_edge, "|seed=", o.seed);
  // The reference schedule's options, named only when set: the keys of runs without them
  // stay as they were, so their checkpoints still resume.
  if (o.eval_every_steps > 0) absl::StrAppend(&key, "|eval_every_steps=", o.eval_every_steps);
  if (o.select_metric == SelectMetric::kAucRoc) absl::StrAppend(&key, "|select=auc_roc");
  if (o.dropout_off_after_eval) absl::StrAppend(&key, "|dropout_off_after_eval");
  if (o.fixed_negatives) absl::StrAppend(&key, "|fixed_negatives");
  if (c.node_feature_dim > 0 && o.node_features != nullptr) {
    absl::StrAppend(&key, "|node_features=", c.node_feature_dim, "x",
                    o.node_features->entities.size());
  }
  return key;
}

// GraIL's part of the training loop (train/training_run.h).
class GrailFamily final : public TrainingFamily {
 public:
  GrailFamily(GrailModel& model, const StaticGraph& graph, const std::vector<Triple>& positives,
              const std::vector<Triple>& valid_facts, const std::vector<int32_t>& feature_rows,
              const GrailTrainOptions& options, TrainingRun& run)
      : model_(model),
        graph_(graph),
        positives_(positives),
        valid_facts_(valid_facts),
        feature_rows_(feature_rows),
        options_(options),
        run_(run) {
    scoring_.threads = options.threads;
    scoring_.node_feature_rows = &feature_rows_;
    // Fixed negatives come from their own generator, drawn again on a resume: they are the
    // same every time.
    if (options.fixed_negatives) {
      SeededRandom draws(MixBits(options.seed ^ 0x6669786564ULL));
      fixed_negatives_.reserve(positives.size());
      for (const Triple& p : positives) {
        fixed_negatives_.push_back(CorruptHeadOrTail(graph, p, draws));
      }
    }
  }

  size_t examples() const override { return positives_.size(); }

  absl::StatusOr<std::unique_ptr<EpochSteps>> Epoch(int epoch, const std::vector<uint32_t>& order,
                                                    int64_t next, int64_t run_steps) override;

  // The same negatives at every validation (their own generator, seeded options.seed + 1:
  // none of the run's), so validations compare on equal terms and touch nothing training
  // reads.
  absl::Status Validate(EpochReport& report, bool scheduled, int64_t step) override {
    absl::StatusOr<ClassificationMetrics> metrics =
        valid_facts_.empty()
            ? absl::StatusOr<ClassificationMetrics>(ClassificationMetrics{})
            : EvaluateClassification(model_, graph_, {}, valid_facts_, options_.seed + 1, scoring_);
    if (!metrics.ok()) return metrics.status();
    Validation v;
    v.step = step;
    v.auc_pr = metrics->auc_pr;
    v.auc_roc = metrics->auc_roc;
    v.best = run_.Offer(options_.select_metric == SelectMetric::kAucRoc ? v.auc_roc : v.auc_pr,
                        scheduled);
    report.best = report.best || v.best;
    report.validations.push_back(v);
    if (options_.dropout_off_after_eval) edge_dropout_ = false;
    return absl::OkStatus();
  }

 private:
  friend class GrailEpochSteps;

  GrailModel& model_;
  const StaticGraph& graph_;
  const std::vector<Triple>& positives_;
  const std::vector<Triple>& valid_facts_;
  const std::vector<int32_t>& feature_rows_;
  const GrailTrainOptions& options_;
  TrainingRun& run_;
  GrailScoringOptions scoring_;
  std::vector<std::optional<Triple>> fixed_negatives_;
  bool edge_dropout_ = true;
};

// An epoch's steps: a producer thread draws the negatives and extracts the subgraphs, a few
// batches ahead of the steps.
class GrailEpochSteps final : public EpochSteps {
 public:
  GrailEpochSteps(GrailFamily& family, const std::vector<uint32_t>& order)
      : family_(family),
        producer_(ProduceEpoch, std::cref(family.graph_), std::cref(family.positives_),
                  std::cref(family.fixed_negatives_), std::cref(order), std::cref(family.options_),
                  std::cref(family.feature_rows_), std::ref(family.run_.negative_random()),
                  std::ref(queue_)) {}

  ~GrailEpochSteps() override {
    TrainingBatch rest;
    while (queue_.Pop(&rest)) {
    }  // drained, so that the producer can finish
    producer_.join();
  }

  absl::StatusOr<std::optional<StepOutcome>> Next() override {
    TrainingBatch batch;
    if (!queue_.Pop(&batch)) {
      if (absl::Status s = queue_.status(); !s.ok()) return s;
      return std::nullopt;
    }
    const GrailTrainOptions& o = family_.options_;
    GrailModule& grail = family_.model_.module();
    torch::Tensor scores = Forward(grail, batch.subgraphs, /*training=*/family_.edge_dropout_);
    torch::Tensor positive = scores.slice(0, 0, batch.positives);
    torch::Tensor negative = scores.slice(0, batch.positives, 2 * batch.positives);
    torch::Tensor loss = torch::clamp_min(negative - positive + o.margin, 0).sum();
    torch::optim::Adam& optimizer = family_.run_.optimizer();
    optimizer.zero_grad();
    loss.backward();
    if (o.clip_norm > 0) {
      torch::nn::utils::clip_grad_norm_(family_.run_.parameters(), o.clip_norm);
    }
    optimizer.step();
    StepOutcome outcome;
    outcome.positives = batch.positives;
    outcome.summed_loss = loss.item<double>();
    outcome.loss = outcome.summed_loss / static_cast<double>(batch.positives);
    return outcome;
  }

 private:
  GrailFamily& family_;
  BatchQueue queue_{/*capacity=*/8};
  std::thread producer_;
};

absl::StatusOr<std::unique_ptr<EpochSteps>> GrailFamily::Epoch(int epoch,
                                                               const std::vector<uint32_t>& order,
                                                               int64_t next, int64_t run_steps) {
  edge_dropout_ = true;  // every epoch starts in training mode
  return std::make_unique<GrailEpochSteps>(*this, order);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GrailModel>> TrainGrail(
    const IndexedTriples& train, absl::Span<const NamedTriple> valid,
    const GrailTrainOptions& options, const std::function<void(const EpochReport&)>& on_epoch,
    const std::function<void(const StepReport&)>& on_step) {
  absl::Status valid_options = ValidateOptions(options);
  if (!valid_options.ok()) return valid_options;
  if (train.triples.empty()) return absl::InvalidArgumentError("no training facts");

  const StaticGraph graph(train.entities.size(), train.triples);
  std::vector<Triple> positives;
  for (const Triple& t : graph.Facts()) {
    if (t.head != t.tail) positives.push_back(t);  // a self-loop has no pair to reason about
  }
  std::vector<Triple> valid_facts;
  for (const NamedTriple& v : valid) {
    auto h = train.entities.Find(v.head);
    auto r = train.relations.Find(v.relation);
    auto t = train.entities.Find(v.tail);
    if (h && r && t && *h != *t) valid_facts.push_back({*h, *r, *t});
  }

  absl::StatusOr<std::unique_ptr<GrailModel>> created =
      GrailModel::Create(options.model, train.relations.names(), options.seed, options.device,
                         options.node_features.get());
  if (!created.ok()) return created.status();
  std::unique_ptr<GrailModel> model = *std::move(created);
  // Early fusion: every training entity's feature row (none without node features).
  const std::vector<int32_t> feature_rows = options.model.node_feature_dim > 0
                                                ? model->NodeFeatureRows(train.entities.names())
                                                : std::vector<int32_t>();

  // Extraction takes a few percent of a step, so the producer shares the cores with
  // LibTorch's kernels rather than reserving one.
  SetComputeThreads(options.threads);
  GrailModule& grail = model->module();
  std::vector<torch::Tensor> parameters;
  for (const torch::Tensor& p : grail.module.parameters()) parameters.push_back(p);
  TrainingRun run(parameters,
                  torch::optim::AdamOptions(options.learning_rate).weight_decay(options.l2),
                  options.seed, 0x6e65676174697665ULL, options.checkpoint_dir,
                  RunKey(options, train, valid_facts.size()));
  if (options.resume) {
    if (absl::Status s = run.Resume(); !s.ok()) return s;
  }
  GrailFamily family(*model, graph, positives, valid_facts, feature_rows, options, run);
  TrainingSchedule schedule;
  schedule.epochs = options.epochs;
  schedule.eval_every = options.eval_every;
  schedule.eval_every_steps = options.eval_every_steps;
  if (absl::Status s = run.Train(family, schedule, on_epoch, on_step); !s.ok()) return s;
  return model;
}

}  // namespace grail
