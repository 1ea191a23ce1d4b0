#include "train/path_trainer.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "eval/path_evaluation.h"
#include "graph/negative_sampling.h"
#include "graph/static_graph.h"
#include "model/core/runtime.h"
#include "model/families.h"
#include "model/path/path_module.h"
#include "train/training_checkpoint.h"
#include "train/training_run.h"

namespace grail {
namespace {

// How many steps' inputs are made ahead (PathTrainOptions::input_threads).
size_t InputDepth(const PathTrainOptions& o, const torch::Device& device) {
  if (o.input_threads > 0) return static_cast<size_t>(o.input_threads);
  return device.is_cpu() ? 1 : 4;
}

absl::Status ValidateOptions(const PathTrainOptions& o) {
  if (o.epochs < 1) return absl::InvalidArgumentError("epochs must be at least 1");
  if (o.batch_size < 1) return absl::InvalidArgumentError("batch size must be at least 1");
  if (o.accumulate < 1) return absl::InvalidArgumentError("accumulate must be at least 1");
  if (o.negatives < 1) return absl::InvalidArgumentError("negatives must be at least 1");
  if (o.eval_every < 1) return absl::InvalidArgumentError("eval_every must be at least 1");
  if (!(o.learning_rate > 0)) return absl::InvalidArgumentError("learning rate must be > 0");
  if (!(o.adversarial_temperature >= 0)) {
    return absl::InvalidArgumentError("the adversarial temperature must be >= 0");
  }
  if (o.threads < 1) return absl::InvalidArgumentError("threads must be at least 1");
  if (o.input_threads < 0) return absl::InvalidArgumentError("input threads must be >= 0");
  if (o.detached_walks < 0) return absl::InvalidArgumentError("detached walks must be >= 0");
  if (o.max_steps < 0) return absl::InvalidArgumentError("max_steps must be >= 0");
  if (!(o.time_budget_seconds >= 0)) {
    return absl::InvalidArgumentError("the time budget must be >= 0 seconds");
  }
  if (o.resume && o.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("resume needs a checkpoint directory");
  }
  if (o.checkpoint_every_steps < 0) {
    return absl::InvalidArgumentError("checkpoint_every_steps must be >= 0");
  }
  if (o.checkpoint_every_steps > 0 && o.checkpoint_dir.empty()) {
    return absl::InvalidArgumentError("checkpoints within an epoch need a checkpoint directory");
  }
  return absl::OkStatus();
}

// What identifies a run: a checkpoint of another run must not be resumed.
std::string RunKey(const PathTrainOptions& o, const std::string& data_fingerprint) {
  const PathConfig& c = o.model;
  return absl::StrCat(
      data_fingerprint, "|layers=", c.num_layers, "|dim=", c.dim, "|pna=", c.pna,
      "|dependent=", c.dependent, "|layer_norm=", c.layer_norm, "|short_cut=", c.short_cut,
      "|reach_mask=", c.reach_mask, "|reach_feature=", c.reach_feature, "|batch=", o.batch_size,
      "|negatives=", o.negatives, "|lr=", o.learning_rate,
      "|temperature=", o.adversarial_temperature, "|remove_one_hop=", o.remove_one_hop,
      "|seed=", o.seed,
      // Absent when off, so checkpoints from before the option still resume.
      o.detached_walks > 0 ? absl::StrCat("|detached_walks=", o.detached_walks) : std::string(),
      o.accumulate > 1 ? absl::StrCat("|accumulate=", o.accumulate) : std::string(),
      o.source_negatives ? "|source_negatives=1" : "",
      c.priority ? absl::StrCat("|priority=", c.prune_node_ratio, ",", c.prune_degree_ratio)
                 : std::string(),
      o.init.empty() ? std::string() : absl::StrCat("|init=", o.init));
}

// A step's input, made on the host in two parts. Its queries and their negatives are drawn on
// the training thread in step order, from the run's one generator, so the run is the same
// however far ahead inputs are made. The batch and where each candidate's score lies among the
// pass's outputs are built on builder threads, `input_threads` steps ahead, each with its own
// builder, while the steps before run (on a GPU the host's building was most of a step:
// docs/BENCHMARKS-log.md, "On a GPU").
struct StepDraw {
  std::vector<PathQuery> queries;
  std::vector<std::vector<EntityId>> candidate_lists;  // per query: answer, then negatives
};
// One forward and backward pass of a step (PathTrainOptions::accumulate).
struct Pass {
  PathBatch batch;
  std::vector<int64_t> gather;
};
struct StepInput {
  absl::Status status;
  std::vector<Pass> passes;
};

// The path family's part of the training loop (train/training_run.h).
class PathFamily final : public TrainingFamily {
 public:
  PathFamily(PathModel& model, PathModule& path, const StaticGraph& message_graph,
             const StaticGraph& graph, const std::vector<Triple>& positives,
             const std::vector<Triple>& valid_facts, const PathTrainOptions& options,
             const PathNeighbourhoodSpec& neighbourhood, bool candidates_only,
             int32_t num_relations, TrainingRun& run)
      : model_(model),
        path_(path),
        message_graph_(message_graph),
        graph_(graph),
        positives_(positives),
        valid_facts_(valid_facts),
        options_(options),
        neighbourhood_(neighbourhood),
        candidates_only_(candidates_only),
        num_relations_(num_relations),
        run_(run),
        builders_(InputDepth(options, path.device)) {  // each keeps scratch sized to the graph
    validation_.sampled = false;
    validation_.full_ranking = true;
    validation_.scoring.batch_queries = options.batch_size;
  }

  size_t examples() const override { return positives_.size(); }

  absl::StatusOr<std::unique_ptr<EpochSteps>> Epoch(int epoch, const std::vector<uint32_t>& order,
                                                    int64_t next, int64_t run_steps) override;

  absl::Status Validate(EpochReport& report, bool scheduled, int64_t step) override {
    return ValidateMrr(run_, report, scheduled, valid_facts_.size(),
                       [&] { return EvaluatePath(model_, graph_, {}, valid_facts_, validation_); });
  }

 private:
  friend class PathEpochSteps;

  // The queries of order[begin, end) and their negatives, drawn from the run's generator.
  StepDraw Draw(const std::vector<uint32_t>& order, size_t begin, size_t end);
  // The step's queries in passes of batch_size, each leaving out what the whole step does.
  StepInput Build(StepDraw d, PathBatchBuilder* builder) const;
  // One step over `in`: its loss per query, or nothing when it has no query.
  std::optional<StepOutcome> Step(const StepInput& in, size_t end);

  PathModel& model_;
  PathModule& path_;
  const StaticGraph& message_graph_;
  const StaticGraph& graph_;
  const std::vector<Triple>& positives_;
  const std::vector<Triple>& valid_facts_;
  const PathTrainOptions& options_;
  const PathNeighbourhoodSpec neighbourhood_;
  const bool candidates_only_;
  const int32_t num_relations_;
  TrainingRun& run_;
  std::vector<PathBatchBuilder> builders_;
  PathEvaluationOptions validation_;
};

// An epoch's steps: `input_threads` inputs in flight, the oldest first, each with the
// negatives' generator as it was before its draws (what a checkpoint taken after the step
// before holds).
class PathEpochSteps final : public EpochSteps {
 public:
  PathEpochSteps(PathFamily& family, const std::vector<uint32_t>& order, int64_t next)
      : family_(family), order_(order), drawn_to_(static_cast<size_t>(next)) {
    while (ahead_.size() < family_.builders_.size() && drawn_to_ < order_.size()) Dispatch();
  }

  absl::StatusOr<std::optional<StepOutcome>> Next() override {
    while (!ahead_.empty()) {
      StepInput in = ahead_.front().input.get();
      const size_t end = ahead_.front().end;
      ahead_.pop_front();
      if (!in.status.ok()) return in.status;
      // A builder is free again (the one this input used): keep `input_threads` in flight.
      Dispatch();
      std::optional<StepOutcome> outcome = family_.Step(in, end);
      if (outcome) return outcome;
    }
    return std::nullopt;
  }

  std::optional<SeededRandom> NegativesAfterLastStep() const override {
    if (ahead_.empty()) return std::nullopt;
    return ahead_.front().random_before;
  }

 private:
  struct Pending {
    SeededRandom random_before;
    size_t end = 0;
    std::future<StepInput> input;
  };

  void Dispatch() {
    if (drawn_to_ >= order_.size()) return;
    const size_t step_queries = static_cast<size_t>(family_.options_.batch_size) *
                                static_cast<size_t>(family_.options_.accumulate);
    Pending p{
        family_.run_.negative_random(), std::min(order_.size(), drawn_to_ + step_queries), {}};
    StepDraw d = family_.Draw(order_, drawn_to_, p.end);
    drawn_to_ = p.end;
    PathBatchBuilder* builder = &family_.builders_[dispatched_++ % family_.builders_.size()];
    p.input = std::async(
        std::launch::async,
        [this, builder](StepDraw draw) { return family_.Build(std::move(draw), builder); },
        std::move(d));
    ahead_.push_back(std::move(p));
  }

  PathFamily& family_;
  const std::vector<uint32_t>& order_;
  std::deque<Pending> ahead_;
  size_t drawn_to_;
  int64_t dispatched_ = 0;
};

absl::StatusOr<std::unique_ptr<EpochSteps>> PathFamily::Epoch(int epoch,
                                                              const std::vector<uint32_t>& order,
                                                              int64_t next, int64_t run_steps) {
  return std::make_unique<PathEpochSteps>(*this, order, next);
}

StepDraw PathFamily::Draw(const std::vector<uint32_t>& order, size_t begin, size_t end) {
  StepDraw d;
  const size_t tails = begin + (end - begin + 1) / 2;  // the first half asks for tails
  for (size_t i = begin; i < end; ++i) {
    const Triple& f = positives_[order[i]];
    const bool tail = i < tails;
    PathQuery query;
    query.source = tail ? f.head : f.tail;
    query.relation = tail ? f.relation : f.relation + num_relations_;
    const EntityId answer = tail ? f.tail : f.head;
    std::vector<EntityId> negatives = SampleNonAnswers(
        message_graph_, query.source, f.relation, !tail, answer, options_.negatives,
        run_.negative_random(),
        options_.source_negatives ? SourceNegative::kUnlessAnswer : SourceNegative::kNever);
    if (negatives.empty()) continue;  // every entity answers: nothing to contrast
    for (size_t k = negatives.size(); k < static_cast<size_t>(options_.negatives); ++k) {
      negatives.push_back(negatives[k % negatives.size()]);  // rare: few non-answers
    }
    std::vector<EntityId> candidates = {answer};
    candidates.insert(candidates.end(), negatives.begin(), negatives.end());
    if (options_.remove_one_hop) {
      query.unlinked = negatives;
      query.unlinked.push_back(answer);
    } else {
      query.hidden_fact = f;
    }
    if (candidates_only_) {
      query.targets = negatives;
      query.targets.push_back(answer);
    }
    d.queries.push_back(std::move(query));
    d.candidate_lists.push_back(std::move(candidates));
  }
  return d;
}

StepInput PathFamily::Build(StepDraw d, PathBatchBuilder* builder) const {
  const int64_t per_query = 1 + options_.negatives;  // the answer, then the negatives
  StepInput in;
  const absl::Span<const PathQuery> step = d.queries;
  for (size_t begin = 0; begin < d.queries.size(); begin += options_.batch_size) {
    const size_t n = std::min<size_t>(options_.batch_size, d.queries.size() - begin);
    Pass& pass = in.passes.emplace_back();
    in.status = builder->Build(neighbourhood_, step.subspan(begin, n), &pass.batch,
                               options_.accumulate > 1 ? step : absl::Span<const PathQuery>());
    if (!in.status.ok()) return in;
    for (size_t q = 0; q < n; ++q) {
      for (EntityId e : d.candidate_lists[begin + q]) {
        pass.gather.push_back(pass.batch.NodeOf(static_cast<int64_t>(q), e));
      }
    }
    // Entities beyond a query's neighbourhood read its far score, after all node scores.
    for (size_t k = 0; k < pass.gather.size(); ++k) {
      if (pass.gather[k] < 0) {
        pass.gather[k] = pass.batch.num_nodes() + static_cast<int64_t>(k) / per_query;
      }
    }
  }
  return in;
}

std::optional<StepOutcome> PathFamily::Step(const StepInput& in, size_t end) {
  const int64_t per_query = 1 + options_.negatives;
  int64_t queries = 0;
  for (const Pass& pass : in.passes) queries += pass.batch.num_queries();
  if (queries == 0) return std::nullopt;
  // The step's loss is the mean over its queries: each pass's mean weighted by its share.
  torch::optim::Adam& optimizer = run_.optimizer();
  optimizer.zero_grad();
  double step_loss = 0;
  for (const Pass& pass : in.passes) {
    auto [node, far] = PathForward(path_, pass.batch);
    torch::Tensor logits =
        torch::cat({node, far})
            .index_select(0, torch::tensor(pass.gather, torch::kInt64).to(node.device()))
            .view({-1, per_query});
    torch::Tensor target = torch::zeros_like(logits);
    target.select(1, 0).fill_(1);
    torch::Tensor loss =
        torch::binary_cross_entropy_with_logits(logits, target, {}, {}, at::Reduction::None);
    torch::Tensor weight = torch::ones_like(logits);
    if (options_.adversarial_temperature > 0) {
      weight.slice(1, 1).copy_(
          torch::softmax(logits.slice(1, 1).detach() / options_.adversarial_temperature, 1));
    } else {
      weight.slice(1, 1).fill_(1.0 / options_.negatives);
    }
    const double share =
        static_cast<double>(pass.batch.num_queries()) / static_cast<double>(queries);
    loss = ((loss * weight).sum(1) / weight.sum(1)).mean() * share;
    loss.backward();
    step_loss += loss.item<double>();
  }
  optimizer.step();
  return StepOutcome::OfMean(queries, step_loss, static_cast<int64_t>(end));
}

}  // namespace

std::vector<Triple> DetachedWalkCopies(const StaticGraph& graph, int copies_per_relation,
                                       uint64_t seed) {
  std::vector<std::vector<Triple>> by_relation(graph.num_relations());
  for (const Triple& t : graph.Facts()) by_relation[t.relation].push_back(t);
  SeededRandom random(seed);
  std::vector<Triple> copies;
  EntityId next = graph.num_entities();
  for (const std::vector<Triple>& facts : by_relation) {
    if (facts.empty()) continue;
    for (int k = 0; k < copies_per_relation; ++k) {
      std::vector<Triple> walk = {facts[random.Uniform(facts.size())]};
      std::vector<EntityId> entities = {walk[0].head, walk[0].tail};
      for (int step = 1; step < 1 + k % 3; ++step) {
        const EntityId e = entities[random.Uniform(entities.size())];
        const absl::Span<const Neighbor> out = graph.OutEdges(e), in = graph.InEdges(e);
        const uint64_t pick = random.Uniform(out.size() + in.size());  // e has walk[0] or more
        const Triple t = pick < out.size() ? Triple{e, out[pick].relation, out[pick].entity}
                                           : Triple{in[pick - out.size()].entity,
                                                    in[pick - out.size()].relation, e};
        if (std::find(walk.begin(), walk.end(), t) != walk.end()) continue;
        walk.push_back(t);
        for (EntityId v : {t.head, t.tail}) {
          if (std::find(entities.begin(), entities.end(), v) == entities.end()) {
            entities.push_back(v);
          }
        }
      }
      // entities[i] becomes next + i: the copy shares no entity with the graph or other copies.
      auto fresh = [&](EntityId v) {
        return next + static_cast<EntityId>(std::find(entities.begin(), entities.end(), v) -
                                            entities.begin());
      };
      for (const Triple& t : walk) copies.push_back({fresh(t.head), t.relation, fresh(t.tail)});
      next += static_cast<EntityId>(entities.size());
    }
  }
  return copies;
}

double MeanLogDegree(const IndexedTriples& graph) {
  std::vector<uint32_t> degree(graph.entities.size(), 0);
  for (const Triple& t : graph.triples) {
    ++degree[t.head];
    ++degree[t.tail];
  }
  double sum = 0;
  for (uint32_t d : degree) sum += std::log(static_cast<double>(d) + 1);
  return degree.empty() ? 1.0 : std::max(1e-3, sum / static_cast<double>(degree.size()));
}

absl::StatusOr<std::unique_ptr<PathModel>> TrainPath(
    const IndexedTriples& train, absl::Span<const NamedTriple> valid,
    const PathTrainOptions& options, const std::function<void(const EpochReport&)>& on_epoch,
    const std::function<void(const StepReport&)>& on_step) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  if (train.triples.empty()) return absl::InvalidArgumentError("no training facts");

  const StaticGraph graph(train.entities.size(), train.triples);
  std::vector<Triple> positives;
  for (const Triple& t : graph.Facts()) {
    if (t.head != t.tail) positives.push_back(t);
  }
  const std::vector<Triple> valid_facts = ValidationFacts(train, graph, valid);
  // What a step passes messages over and draws negatives from: the graph, plus any detached
  // copies (entities numbered after the graph's, so the positives and validation are as given).
  std::optional<StaticGraph> with_copies;
  if (options.detached_walks > 0) {
    const std::vector<Triple> copies =
        DetachedWalkCopies(graph, options.detached_walks, options.seed ^ 0x64657461636865ULL);
    EntityId entities = graph.num_entities();
    for (const Triple& t : copies) entities = std::max({entities, t.head + 1, t.tail + 1});
    std::vector<Triple> facts = train.triples;  // repeats collapse in StaticGraph, as in `graph`
    facts.insert(facts.end(), copies.begin(), copies.end());
    with_copies.emplace(entities, facts);
  }
  const StaticGraph& message_graph = with_copies ? *with_copies : graph;

  absl::StatusOr<std::unique_ptr<PathModel>> created;
  if (!options.init.empty()) {
    // A path archive of either network: NBFNet's or A*Net's, or ULTRA's to fine-tune.
    absl::StatusOr<AnyModel> loaded = LoadAnyModel(options.init, options.device);
    if (!loaded.ok()) return loaded.status();
    if (loaded->path == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.init, " is an archive of another family than the path family or ULTRA"));
    }
    created = std::move(loaded->path);
    if (!(*created)->open_vocabulary() && (*created)->relations() != train.relations.names()) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.init, " has a relation vocabulary other than the training graph's (",
          (*created)->num_relations(), " relations against ", train.relations.size(), ")"));
    }
  } else {
    PathConfig config = options.model;
    config.pna_delta = MeanLogDegree(train);
    created = PathModel::Create(config, train.relations.names(), options.seed, options.device);
  }
  if (!created.ok()) return created.status();
  std::unique_ptr<PathModel> model = *std::move(created);
  const int32_t num_relations = model->NumRelations(message_graph);

  SetComputeThreads(options.threads);
  PathModule& path = model->module();
  for (torch::Tensor p : path.module.parameters()) p.requires_grad_(true);  // a loaded archive's
  std::vector<torch::Tensor> parameters;
  for (const torch::Tensor& p : path.module.parameters()) parameters.push_back(p);
  TrainingRun run(std::move(parameters), torch::optim::AdamOptions(options.learning_rate),
                  options.seed, 0x6e65676174697665ULL, options.checkpoint_dir,
                  RunKey(options, TrainingDataFingerprint(train, valid_facts.size())));
  if (options.resume) {
    if (absl::Status s = run.Resume(); !s.ok()) return s;
  }
  // A step reads each query's answer and negatives only, so its pass may cover just what
  // their scores depend on (a query with targets, model/path/path_batch.h): the same loss and
  // gradients as over the source's whole neighbourhood, on far fewer entities where paths
  // are sparse.
  const RelationMap identity;
  PathNeighbourhoodSpec neighbourhood = model->Neighbourhood(&message_graph, &identity, 0);
  if (options.layout != PathLayout::kCheaper) {
    if (neighbourhood.layout == PathLayout::kDisjoint && options.layout == PathLayout::kShared) {
      return absl::InvalidArgumentError(
          "a shared batch needs the fused operator (--message-passing fused)");
    }
    neighbourhood.layout = options.layout;
  }
  // A learned priority trains pruned, as it will serve: each layer from its share of the
  // graph's entities (model/path/path_model.h), chosen among every entity the query reaches,
  // so over the whole neighbourhood and not only the candidates' paths.
  bool candidates_only = options.candidates_only;
  if (model->config().priority && model->config().prune_node_ratio < 1) {
    candidates_only = false;
    neighbourhood.prune.layer_nodes = std::max<int64_t>(
        1, static_cast<int64_t>(model->config().prune_node_ratio *
                                static_cast<double>(message_graph.num_entities())));
  }
  PathFamily family(*model, path, message_graph, graph, positives, valid_facts, options,
                    neighbourhood, candidates_only, num_relations, run);
  TrainingSchedule schedule;
  schedule.epochs = options.epochs;
  schedule.eval_every = options.eval_every;
  schedule.checkpoint_every_steps = options.checkpoint_every_steps;
  schedule.max_steps = options.max_steps;
  schedule.time_budget_seconds = options.time_budget_seconds;
  schedule.trace = options.trace;
  schedule.cuda = path.device.is_cuda();
  if (absl::Status s = run.Train(family, schedule, on_epoch, on_step); !s.ok()) return s;
  return model;
}

}  // namespace grail
