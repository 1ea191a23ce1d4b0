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
  KgeModule& kge = model->module();
  const torch::Device device = kge.device;
  std::vector<torch::Tensor> parameters;
  for (const torch::Tensor& p : kge.module.parameters()) parameters.push_back(p);
  const torch::Tensor entity_embedding = kge.module.attr("entity_embedding").toTensor();
  const torch::Tensor relation_embedding = kge.module.attr("relation_embedding").toTensor();
  TrainingRun run(std::move(parameters), torch::optim::AdamOptions(options.learning_rate),
                  options.seed, 0x6b67656e65676174ULL, options.checkpoint_dir,
                  RunKey(options, TrainingDataFingerprint(train, valid_facts.size())));
  if (options.resume) {
    if (absl::Status s = run.Resume(); !s.ok()) return s;
  }
  torch::optim::Adam& optimizer = run.optimizer();
  SeededRandom& negative_random = run.negative_random();

  KgeEvaluationOptions validation;
  validation.sampled = false;
  validation.full_ranking = true;
  std::vector<uint32_t> order(facts.size());
  for (int epoch = run.position().epoch + 1; epoch <= options.epochs; ++epoch) {
    const auto start = std::chrono::steady_clock::now();
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    run.order_random().Shuffle(order);
    const bool decayed = options.lr_decay_epoch > 0 && epoch > options.lr_decay_epoch;
    SetLearningRate(optimizer, decayed ? options.learning_rate / 10 : options.learning_rate);
    double total_loss = 0;
    int64_t seen = 0, steps = 0;
    std::vector<int64_t> heads, relations, tails, negatives;
    std::vector<float> batch_weights;
    for (size_t begin = 0; begin < order.size(); begin += options.batch_size) {
      const size_t end = std::min(order.size(), begin + options.batch_size);
      const int64_t step = run.position().steps + steps;  // over the whole run
      const bool corrupt_heads = step % 2 == 0;           // the RotatE code starts with heads
      heads.clear();
      relations.clear();
      tails.clear();
      negatives.clear();
      batch_weights.clear();
      for (size_t i = begin; i < end; ++i) {
        const Triple& f = facts[order[i]];
        std::vector<EntityId> drawn =
            corrupt_heads ? SampleNonAnswers(graph, f.tail, f.relation, true, f.head,
                                             options.negatives, negative_random)
                          : SampleNonAnswers(graph, f.head, f.relation, false, f.tail,
                                             options.negatives, negative_random);
        if (drawn.empty()) continue;  // every entity answers: nothing to contrast
        for (int k = 0; k < options.negatives; ++k) negatives.push_back(drawn[k % drawn.size()]);
        heads.push_back(f.head);
        relations.push_back(f.relation);
        tails.push_back(f.tail);
        batch_weights.push_back(options.subsampling ? weights[order[i]] : 1.0f);
      }
      if (heads.empty()) continue;
      const auto b = static_cast<int64_t>(heads.size());
      try {
        const torch::Tensor h = torch::tensor(heads, torch::kInt64).to(device).view({b, 1});
        const torch::Tensor r = torch::tensor(relations, torch::kInt64).to(device);
        const torch::Tensor t = torch::tensor(tails, torch::kInt64).to(device).view({b, 1});
        const torch::Tensor n =
            torch::tensor(negatives, torch::kInt64).to(device).view({b, options.negatives});
        const torch::Tensor w = torch::tensor(batch_weights).to(device);
        const double total_weight = w.sum().item<double>();
        optimizer.zero_grad();
        // The loss is a sum over facts, so the step runs in chunks whose gradients add up:
        // a whole step of the recipe (512 facts x 1024 negatives x 1000 numbers) would hold
        // several 2 GiB tensors at once.
        const int64_t chunk = FactsPerChunk(options.negatives, options.model.entity_width());
        double step_loss = 0;
        for (int64_t c = 0; c < b; c += chunk) {
          const int64_t e = std::min(b, c + chunk);
          const torch::Tensor hc = h.slice(0, c, e), rc = r.slice(0, c, e), tc = t.slice(0, c, e);
          const torch::Tensor nc = n.slice(0, c, e), wc = w.slice(0, c, e);
          const torch::Tensor positive = torch::log_sigmoid(KgeForward(kge, hc, rc, tc).squeeze(1));
          const torch::Tensor negative_scores =
              corrupt_heads ? KgeForward(kge, nc, rc, tc) : KgeForward(kge, hc, rc, nc);
          torch::Tensor negative;
          if (options.adversarial_alpha > 0) {
            negative = (torch::softmax(negative_scores * options.adversarial_alpha, 1).detach() *
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
        if (options.regularization > 0) {
          const torch::Tensor penalty =
              options.regularization *
              (entity_embedding.abs().pow(3).sum() + relation_embedding.abs().pow(3).sum());
          penalty.backward();
          step_loss += penalty.item<double>();
        }
        optimizer.step();
        total_loss += step_loss * static_cast<double>(b);
        seen += b;
        ++steps;
        if (on_step) {
          StepReport report;
          report.epoch = epoch;
          report.positives_done = seen;
          report.positives_total = static_cast<int64_t>(facts.size());
          report.steps_done = steps;
          report.loss = step_loss;
          report.seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          on_step(report);
        }
      } catch (const std::exception& e) {
        return absl::InternalError(absl::StrCat("training step failed: ", e.what()));
      }
    }
    EpochReport ended;
    ended.epoch = epoch;
    ended.positives = seen;
    absl::StatusOr<EpochReport> report = run.EndEpoch(
        ended, options.epochs, options.eval_every, steps, total_loss,
        MrrValidation(run, valid_facts.size(),
                      [&] { return EvaluateKge(*model, graph, {}, valid_facts, validation); }),
        start);
    if (!report.ok()) return report.status();
    if (on_epoch) on_epoch(*report);
  }
  run.Finish();
  return model;
}

}  // namespace grail
