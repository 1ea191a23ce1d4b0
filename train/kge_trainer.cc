#include "train/kge_trainer.h"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "eval/kge_evaluation.h"
#include "graph/negative_sampling.h"
#include "graph/static_graph.h"
#include "model/core/runtime.h"
#include "model/kge/kge_module.h"
#include "train/training_checkpoint.h"
#include "train/training_run.h"

namespace grail {
namespace {

absl::Status ValidateOptions(const KgeTrainOptions& o) {
  if (o.epochs < 1) return absl::InvalidArgumentError("epochs must be at least 1");
  if (o.batch_size < 1) return absl::InvalidArgumentError("batch size must be at least 1");
  if (o.negatives < 1) return absl::InvalidArgumentError("negatives must be at least 1");
  if (o.eval_every < 1) return absl::InvalidArgumentError("eval_every must be at least 1");
  if (o.lr_decay_epoch < 0) return absl::InvalidArgumentError("lr_decay_epoch must be >= 0");
  if (!(o.learning_rate > 0)) return absl::InvalidArgumentError("learning rate must be > 0");
  if (!(o.regularization >= 0)) return absl::InvalidArgumentError("regularization must be >= 0");
  if (!(o.adversarial_alpha >= 0)) {
    return absl::InvalidArgumentError("the adversarial alpha must be >= 0");
  }
  if (o.threads < 1) return absl::InvalidArgumentError("threads must be at least 1");
  if (o.resume && o.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("resume needs a checkpoint directory");
  }
  return absl::OkStatus();
}

std::string RunKey(const KgeTrainOptions& o, const std::string& data_fingerprint) {
  const KgeConfig& c = o.model;
  return absl::StrCat(data_fingerprint, "|kge=", KgeKindName(c.kind), "|dim=", c.dim,
                      "|gamma=", c.gamma, "|decay=", o.lr_decay_epoch, "|batch=", o.batch_size,
                      "|negatives=", o.negatives, "|lr=", o.learning_rate,
                      "|regularization=", o.regularization, "|temperature=", o.adversarial_alpha,
                      "|subsampling=", o.subsampling, "|seed=", o.seed);
}

// The subsampling weight of each fact: 1 / sqrt(c(h, r) + c(t, r^-1)), where c counts the
// training facts with that head and relation (tail and inverse relation) plus 3, as the
// RotatE code's counts, which start at 4 for the first fact.
std::vector<float> SubsamplingWeights(absl::Span<const Triple> facts, int32_t num_relations) {
  absl::flat_hash_map<uint64_t, int64_t> count;
  auto key = [num_relations](EntityId e, int64_t r) {
    return static_cast<uint64_t>(e) * static_cast<uint64_t>(2 * num_relations) +
           static_cast<uint64_t>(r);
  };
  for (const Triple& f : facts) {
    ++count[key(f.head, f.relation)];
    ++count[key(f.tail, f.relation + num_relations)];
  }
  std::vector<float> weights;
  weights.reserve(facts.size());
  for (const Triple& f : facts) {
    const int64_t n =
        6 + count[key(f.head, f.relation)] + count[key(f.tail, f.relation + num_relations)];
    weights.push_back(static_cast<float>(1.0 / std::sqrt(static_cast<double>(n))));
  }
  return weights;
}

// Facts per forward of a training step: keeps a [facts, negatives, width] tensor below 2^25
// floats (128 MiB).
int64_t FactsPerChunk(int negatives, int width) {
  return std::max<int64_t>(1, (int64_t{1} << 25) / (int64_t{negatives} * width));
}

void SetLearningRate(torch::optim::Adam& optimizer, double lr) {
  for (auto& group : optimizer.param_groups()) {
    static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
  }
}

// The KGE models' part of the training loop (train/training_run.h).
class KgeFamily final : public TrainingFamily {
 public:
  KgeFamily(KgeModel& model, const StaticGraph& graph, const std::vector<Triple>& facts,
            const std::vector<float>& weights, const std::vector<Triple>& valid_facts,
            const KgeTrainOptions& options, TrainingRun& run)
      : model_(model),
        graph_(graph),
        facts_(facts),
        weights_(weights),
        valid_facts_(valid_facts),
        options_(options),
        run_(run),
        entity_embedding_(model.module().module.attr("entity_embedding").toTensor()),
        relation_embedding_(model.module().module.attr("relation_embedding").toTensor()) {
    validation_.sampled = false;
    validation_.full_ranking = true;
  }

  size_t examples() const override { return facts_.size(); }

  absl::StatusOr<std::unique_ptr<EpochSteps>> Epoch(int epoch, const std::vector<uint32_t>& order,
                                                    int64_t next, int64_t run_steps) override;

  absl::Status Validate(EpochReport& report, bool scheduled, int64_t step) override {
    return ValidateMrr(run_, report, scheduled, valid_facts_.size(),
                       [&] { return EvaluateKge(model_, graph_, {}, valid_facts_, validation_); });
  }

  // The step over order[begin, end), the run's `step`-th; nothing when no fact of it has a
  // negative.
  std::optional<StepOutcome> Step(const std::vector<uint32_t>& order, size_t begin, size_t end,
                                  int64_t step);

 private:
  KgeModel& model_;
  const StaticGraph& graph_;
  const std::vector<Triple>& facts_;
  const std::vector<float>& weights_;
  const std::vector<Triple>& valid_facts_;
  const KgeTrainOptions& options_;
  TrainingRun& run_;
  const torch::Tensor entity_embedding_;
  const torch::Tensor relation_embedding_;
  KgeEvaluationOptions validation_;
  std::vector<int64_t> heads_, relations_, tails_, negatives_;
  std::vector<float> batch_weights_;
};

// An epoch's steps: batches of the order, one after another.
class KgeEpochSteps final : public EpochSteps {
 public:
  KgeEpochSteps(KgeFamily& family, const std::vector<uint32_t>& order, int64_t next,
                int64_t run_steps, size_t batch_size)
      : family_(family),
        order_(order),
        begin_(static_cast<size_t>(next)),
        step_(run_steps),
        batch_size_(batch_size) {}

  absl::StatusOr<std::optional<StepOutcome>> Next() override {
    while (begin_ < order_.size()) {
      const size_t end = std::min(order_.size(), begin_ + batch_size_);
      std::optional<StepOutcome> outcome = family_.Step(order_, begin_, end, step_);
      begin_ = end;
      if (outcome) {
        ++step_;
        return outcome;
      }
    }
    return std::nullopt;
  }

 private:
  KgeFamily& family_;
  const std::vector<uint32_t>& order_;
  size_t begin_;
  int64_t step_;  // over the whole run
  const size_t batch_size_;
};

absl::StatusOr<std::unique_ptr<EpochSteps>> KgeFamily::Epoch(int epoch,
                                                             const std::vector<uint32_t>& order,
                                                             int64_t next, int64_t run_steps) {
  const bool decayed = options_.lr_decay_epoch > 0 && epoch > options_.lr_decay_epoch;
  SetLearningRate(run_.optimizer(), decayed ? options_.learning_rate / 10 : options_.learning_rate);
  return std::make_unique<KgeEpochSteps>(*this, order, next, run_steps,
                                         static_cast<size_t>(options_.batch_size));
}

std::optional<StepOutcome> KgeFamily::Step(const std::vector<uint32_t>& order, size_t begin,
                                           size_t end, int64_t step) {
  const bool corrupt_heads = step % 2 == 0;  // the RotatE code starts with heads
  heads_.clear();
  relations_.clear();
  tails_.clear();
  negatives_.clear();
  batch_weights_.clear();
  for (size_t i = begin; i < end; ++i) {
    const Triple& f = facts_[order[i]];
    std::vector<EntityId> drawn =
        corrupt_heads ? SampleNonAnswers(graph_, f.tail, f.relation, true, f.head,
                                         options_.negatives, run_.negative_random())
                      : SampleNonAnswers(graph_, f.head, f.relation, false, f.tail,
                                         options_.negatives, run_.negative_random());
    if (drawn.empty()) continue;  // every entity answers: nothing to contrast
    for (int k = 0; k < options_.negatives; ++k) negatives_.push_back(drawn[k % drawn.size()]);
    heads_.push_back(f.head);
    relations_.push_back(f.relation);
    tails_.push_back(f.tail);
    batch_weights_.push_back(options_.subsampling ? weights_[order[i]] : 1.0f);
  }
  if (heads_.empty()) return std::nullopt;
  KgeModule& kge = model_.module();
  const torch::Device device = kge.device;
  const auto b = static_cast<int64_t>(heads_.size());
  const torch::Tensor h = torch::tensor(heads_, torch::kInt64).to(device).view({b, 1});
  const torch::Tensor r = torch::tensor(relations_, torch::kInt64).to(device);
  const torch::Tensor t = torch::tensor(tails_, torch::kInt64).to(device).view({b, 1});
  const torch::Tensor n =
      torch::tensor(negatives_, torch::kInt64).to(device).view({b, options_.negatives});
  const torch::Tensor w = torch::tensor(batch_weights_).to(device);
  const double total_weight = w.sum().item<double>();
  torch::optim::Adam& optimizer = run_.optimizer();
  optimizer.zero_grad();
  // The loss is a sum over facts, so the step runs in chunks whose gradients add up: a whole
  // step of the recipe (512 facts x 1024 negatives x 1000 numbers) would hold several 2 GiB
  // tensors at once.
  const int64_t chunk = FactsPerChunk(options_.negatives, options_.model.entity_width());
  double step_loss = 0;
  for (int64_t c = 0; c < b; c += chunk) {
    const int64_t e = std::min(b, c + chunk);
    const torch::Tensor hc = h.slice(0, c, e), rc = r.slice(0, c, e), tc = t.slice(0, c, e);
    const torch::Tensor nc = n.slice(0, c, e), wc = w.slice(0, c, e);
    const torch::Tensor positive = torch::log_sigmoid(KgeForward(kge, hc, rc, tc).squeeze(1));
    const torch::Tensor negative_scores =
        corrupt_heads ? KgeForward(kge, nc, rc, tc) : KgeForward(kge, hc, rc, nc);
    torch::Tensor negative;
    if (options_.adversarial_alpha > 0) {
      negative = (torch::softmax(negative_scores * options_.adversarial_alpha, 1).detach() *
                  torch::log_sigmoid(-negative_scores))
                     .sum(1);
    } else {
      negative = torch::log_sigmoid(-negative_scores).mean(1);
    }
    const torch::Tensor loss =
        -((wc * positive).sum() + (wc * negative).sum()) / (2 * total_weight);
    loss.backward();
    step_loss += loss.item<double>();
  }
  if (options_.regularization > 0) {
    const torch::Tensor penalty =
        options_.regularization *
        (entity_embedding_.abs().pow(3).sum() + relation_embedding_.abs().pow(3).sum());
    penalty.backward();
    step_loss += penalty.item<double>();
  }
  optimizer.step();
  return StepOutcome::OfMean(b, step_loss, static_cast<int64_t>(end));
}

}  // namespace

KgeTrainOptions RecipeFor(KgeKind kind) {
  KgeTrainOptions o;
  o.model.kind = kind;
  switch (kind) {
    case KgeKind::kTransE:
    case KgeKind::kRotatE:
      o.model.dim = 500;
      o.model.gamma = 6.0;
      o.learning_rate = 5e-5;
      break;
    case KgeKind::kComplEx:
      o.model.dim = 500;
      o.model.gamma = 200.0;
      o.learning_rate = 2e-3;
      o.regularization = 5e-6;
      break;
    case KgeKind::kDistMult:
      o.model.dim = 1000;
      o.model.gamma = 200.0;
      o.learning_rate = 2e-3;
      o.regularization = 5e-6;
      break;
  }
  return o;
}

absl::StatusOr<std::unique_ptr<KgeModel>> TrainKge(
    const IndexedTriples& train, absl::Span<const NamedTriple> valid,
    const KgeTrainOptions& options, const std::function<void(const EpochReport&)>& on_epoch,
    const std::function<void(const StepReport&)>& on_step) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  if (train.triples.empty()) return absl::InvalidArgumentError("no training facts");

  const StaticGraph graph(train.entities.size(), train.triples);
  const std::vector<Triple> facts = graph.Facts();
  const std::vector<Triple> valid_facts = ValidationFacts(train, graph, valid);

  absl::StatusOr<std::unique_ptr<KgeModel>> created = KgeModel::Create(
      options.model, train.entities.names(), train.relations.names(), options.seed, options.device);
  if (!created.ok()) return created.status();
  std::unique_ptr<KgeModel> model = *std::move(created);
  const int32_t num_relations = model->num_relations();
  const std::vector<float> weights = SubsamplingWeights(facts, num_relations);

  SetComputeThreads(options.threads);
  std::vector<torch::Tensor> parameters;
  for (const torch::Tensor& p : model->module().module.parameters()) parameters.push_back(p);
  TrainingRun run(std::move(parameters), torch::optim::AdamOptions(options.learning_rate),
                  options.seed, 0x6b67656e65676174ULL, options.checkpoint_dir,
                  RunKey(options, TrainingDataFingerprint(train, valid_facts.size())));
  if (options.resume) {
    if (absl::Status s = run.Resume(); !s.ok()) return s;
  }
  KgeFamily family(*model, graph, facts, weights, valid_facts, options, run);
  TrainingSchedule schedule;
  schedule.epochs = options.epochs;
  schedule.eval_every = options.eval_every;
  if (absl::Status s = run.Train(family, schedule, on_epoch, on_step); !s.ok()) return s;
  return model;
}

}  // namespace grail
