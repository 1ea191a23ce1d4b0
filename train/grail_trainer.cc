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
  torch::optim::Adam& optimizer = run.optimizer();
  std::vector<uint32_t> order(positives.size());
  GrailScoringOptions scoring;
  scoring.threads = options.threads;
  scoring.node_feature_rows = &feature_rows;
  // Fixed negatives come from their own generator, drawn again on a resume: they are the
  // same every time.
  std::vector<std::optional<Triple>> fixed_negatives;
  if (options.fixed_negatives) {
    SeededRandom draws(MixBits(options.seed ^ 0x6669786564ULL));
    fixed_negatives.reserve(positives.size());
    for (const Triple& p : positives) fixed_negatives.push_back(CorruptHeadOrTail(graph, p, draws));
  }

  // Validates the current parameters into `report` and offers them as the best; the same
  // negatives at every validation (their own generator, seeded options.seed + 1: none of the
  // run's), so validations compare on equal terms and touch nothing training reads.
  auto validate = [&](bool scheduled, int64_t step, EpochReport& report) -> absl::Status {
    absl::StatusOr<ClassificationMetrics> metrics =
        valid_facts.empty()
            ? absl::StatusOr<ClassificationMetrics>(ClassificationMetrics{})
            : EvaluateClassification(*model, graph, {}, valid_facts, options.seed + 1, scoring);
    if (!metrics.ok()) return metrics.status();
    Validation v;
    v.step = step;
    v.auc_pr = metrics->auc_pr;
    v.auc_roc = metrics->auc_roc;
    v.best =
        run.Offer(options.select_metric == SelectMetric::kAucRoc ? v.auc_roc : v.auc_pr, scheduled);
    report.best = report.best || v.best;
    report.validations.push_back(v);
    return absl::OkStatus();
  };

  for (int epoch = run.position().epoch + 1; epoch <= options.epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    run.order_random().Shuffle(order);

    BatchQueue queue(/*capacity=*/8);
    std::thread producer(ProduceEpoch, std::cref(graph), std::cref(positives),
                         std::cref(fixed_negatives), std::cref(order), std::cref(options),
                         std::cref(feature_rows), std::ref(run.negative_random()), std::ref(queue));
    EpochReport report;
    report.epoch = epoch;
    double total_loss = 0;
    int64_t seen = 0;
    int64_t steps = 0;
    bool edge_dropout = true;  // every epoch starts in training mode
    TrainingBatch batch;
    absl::Status step_error;
    while (queue.Pop(&batch)) {
      if (!step_error.ok()) continue;  // drain so the producer can finish
      try {
        torch::Tensor scores = Forward(grail, batch.subgraphs, /*training=*/edge_dropout);
        torch::Tensor positive = scores.slice(0, 0, batch.positives);
        torch::Tensor negative = scores.slice(0, batch.positives, 2 * batch.positives);
        torch::Tensor loss = torch::clamp_min(negative - positive + options.margin, 0).sum();
        optimizer.zero_grad();
        loss.backward();
        if (options.clip_norm > 0) torch::nn::utils::clip_grad_norm_(parameters, options.clip_norm);
        optimizer.step();
        const double step_loss = loss.item<double>();
        total_loss += step_loss;
        seen += batch.positives;
        ++steps;
        if (const int64_t run_steps = run.position().steps + steps;
            options.eval_every_steps > 0 && run_steps % options.eval_every_steps == 0) {
          step_error = validate(/*scheduled=*/true, run_steps, report);
          if (options.dropout_off_after_eval) edge_dropout = false;
        }
        if (on_step) {
          StepReport step;
          step.epoch = epoch;
          step.positives_done = seen;
          step.positives_total = static_cast<int64_t>(positives.size());
          step.steps_done = steps;
          step.loss = step_loss / static_cast<double>(batch.positives);
          step.seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          on_step(step);
        }
      } catch (const c10::Error& e) {
        step_error =
            absl::InternalError(absl::StrCat("training step failed: ", e.what_without_backtrace()));
      }
    }
    producer.join();
    if (!step_error.ok()) return step_error;
    if (absl::Status s = queue.status(); !s.ok()) return s;

    report.positives = seen;
    // A step schedule validates within epochs only; otherwise every eval_every epochs and
    // after the last.
    TrainingRun::Validation end_of_epoch;
    if (options.eval_every_steps == 0) {
      const int64_t run_steps = run.position().steps + steps;
      end_of_epoch = [&validate, run_steps](EpochReport& r, bool scheduled) {
        return validate(scheduled, run_steps, r);
      };
    }
    absl::StatusOr<EpochReport> ended =
        run.EndEpoch(std::move(report), options.epochs, options.eval_every, steps, total_loss,
                     end_of_epoch, start);
    if (!ended.ok()) return ended.status();
    if (on_epoch) on_epoch(*ended);
  }
  run.Finish();
  return model;
}

}  // namespace grail
