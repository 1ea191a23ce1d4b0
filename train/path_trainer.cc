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
    created = PathModel::Load(options.init, options.device);
    if (created.ok() && !(*created)->open_vocabulary() &&
        (*created)->relations() != train.relations.names()) {
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
  torch::optim::Adam& optimizer = run.optimizer();
  SeededRandom& negative_random = run.negative_random();

  PathEvaluationOptions validation;
  validation.sampled = false;
  validation.full_ranking = true;
  validation.scoring.batch_queries = options.batch_size;
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
  // One builder per input made ahead (each keeps scratch sized to the graph).
  std::vector<PathBatchBuilder> builders(InputDepth(options, path.device));
  StepTrace trace(options.trace, path.device.is_cuda());
  int64_t steps_run = 0;  // by this call, over its epochs
  std::vector<uint32_t> order(positives.size());
  EpochProgress resumed = run.position().within;  // of the first epoch this call runs
  for (int epoch = run.position().epoch + 1; epoch <= options.epochs; ++epoch) {
    EpochProgress progress = std::exchange(resumed, EpochProgress{});
    const auto start = std::chrono::steady_clock::now() -
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(progress.seconds));
    const SeededRandom order_at_start = run.order_random();
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    run.order_random().Shuffle(order);
    double step_loss = 0;
    // A step's input, made on the host in two parts. Its queries and their negatives are drawn
    // on this thread in step order, from the run's one generator, so the run is the same
    // however far ahead inputs are made. The batch and where each candidate's score lies among
    // the pass's outputs are built on builder threads, `input_threads` steps ahead, each with
    // its own builder, while the steps before run (on a GPU the host's building was most of a
    // step: docs/BENCHMARKS.md, "On a GPU").
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
    const int64_t per_query = 1 + options.negatives;  // the answer, then the negatives
    const size_t step_queries = static_cast<size_t>(options.batch_size) * options.accumulate;
    auto draw = [&](size_t begin, size_t end) {
      StepDraw d;
      const size_t tails = begin + (end - begin + 1) / 2;  // the first half asks for tails
      for (size_t i = begin; i < end; ++i) {
        const Triple& f = positives[order[i]];
        const bool tail = i < tails;
        PathQuery query;
        query.source = tail ? f.head : f.tail;
        query.relation = tail ? f.relation : f.relation + num_relations;
        const EntityId answer = tail ? f.tail : f.head;
        std::vector<EntityId> negatives = SampleNonAnswers(
            message_graph, query.source, f.relation, !tail, answer, options.negatives,
            negative_random,
            options.source_negatives ? SourceNegative::kUnlessAnswer : SourceNegative::kNever);
        if (negatives.empty()) continue;  // every entity answers: nothing to contrast
        for (size_t k = negatives.size(); k < static_cast<size_t>(options.negatives); ++k) {
          negatives.push_back(negatives[k % negatives.size()]);  // rare: few non-answers
        }
        std::vector<EntityId> candidates = {answer};
        candidates.insert(candidates.end(), negatives.begin(), negatives.end());
        if (options.remove_one_hop) {
          query.unlinked = negatives;
          query.unlinked.push_back(answer);
        } else {
          query.hidden_fact = f;
        }
        if (candidates_only) {
          query.targets = negatives;
          query.targets.push_back(answer);
        }
        d.queries.push_back(std::move(query));
        d.candidate_lists.push_back(std::move(candidates));
      }
      return d;
    };
    // The step's queries in passes of batch_size, each leaving out what the whole step does.
    auto build = [&](StepDraw d, PathBatchBuilder* builder) {
      StepInput in;
      const absl::Span<const PathQuery> step = d.queries;
      for (size_t begin = 0; begin < d.queries.size(); begin += options.batch_size) {
        const size_t n = std::min<size_t>(options.batch_size, d.queries.size() - begin);
        Pass& pass = in.passes.emplace_back();
        in.status = builder->Build(neighbourhood, step.subspan(begin, n), &pass.batch,
                                   options.accumulate > 1 ? step : absl::Span<const PathQuery>());
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
    };
    // The steps drawn and dispatched, oldest first, each with the generator as it was before
    // its draws (what a checkpoint taken after the step before holds).
    struct Pending {
      SeededRandom random_before;
      size_t end = 0;
      std::future<StepInput> input;
    };
    std::deque<Pending> ahead;
    size_t drawn_to = static_cast<size_t>(progress.next);
    int64_t dispatched = 0;
    auto dispatch = [&] {
      if (drawn_to >= order.size()) return;
      Pending p{negative_random, std::min(order.size(), drawn_to + step_queries), {}};
      StepDraw d = draw(drawn_to, p.end);
      drawn_to = p.end;
      p.input = std::async(std::launch::async, build, std::move(d),
                           &builders[dispatched++ % builders.size()]);
      ahead.push_back(std::move(p));
    };
    while (ahead.size() < builders.size() && drawn_to < order.size()) dispatch();
    while (!ahead.empty()) {
      StepInput in = ahead.front().input.get();
      const size_t end = ahead.front().end;
      ahead.pop_front();
      if (!in.status.ok()) return in.status;
      // A builder is free again (the one this input used): keep `input_threads` in flight.
      dispatch();
      int64_t queries = 0;
      for (const Pass& pass : in.passes) queries += pass.batch.num_queries();
      if (queries == 0) continue;
      trace.BeforeStep(steps_run);
      try {
        // The step's loss is the mean over its queries: each pass's mean weighted by its share.
        optimizer.zero_grad();
        step_loss = 0;
        for (const Pass& pass : in.passes) {
          auto [node, far] = PathForward(path, pass.batch);
          torch::Tensor logits =
              torch::cat({node, far})
                  .index_select(0, torch::tensor(pass.gather, torch::kInt64).to(node.device()))
                  .view({-1, per_query});
          torch::Tensor target = torch::zeros_like(logits);
          target.select(1, 0).fill_(1);
          torch::Tensor loss =
              torch::binary_cross_entropy_with_logits(logits, target, {}, {}, at::Reduction::None);
          torch::Tensor weight = torch::ones_like(logits);
          if (options.adversarial_temperature > 0) {
            weight.slice(1, 1).copy_(
                torch::softmax(logits.slice(1, 1).detach() / options.adversarial_temperature, 1));
          } else {
            weight.slice(1, 1).fill_(1.0 / options.negatives);
          }
          const double share =
              static_cast<double>(pass.batch.num_queries()) / static_cast<double>(queries);
          loss = ((loss * weight).sum(1) / weight.sum(1)).mean() * share;
          loss.backward();
          step_loss += loss.item<double>();
        }
        optimizer.step();
        progress.loss += step_loss * static_cast<double>(queries);
        progress.seen += queries;
        ++progress.steps;
        progress.next = static_cast<int64_t>(end);
        ++steps_run;
      } catch (const c10::Error& e) {
        return absl::InternalError(
            absl::StrCat("training step failed: ", e.what_without_backtrace()));
      } catch (const std::exception& e) {  // the TorchScript interpreter's errors
        return absl::InternalError(absl::StrCat("training step failed: ", e.what()));
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (options.checkpoint_every_steps > 0 && end < order.size() &&
          progress.steps % options.checkpoint_every_steps == 0) {
        progress.seconds = seconds;
        // The generator as this step left it: before the draws of the steps made ahead.
        const SeededRandom drawn = std::exchange(negative_random, ahead.front().random_before);
        const absl::Status s = run.CheckpointWithin(progress, order_at_start);
        negative_random = drawn;
        if (!s.ok()) return s;
      }
      if (absl::Status s = trace.AfterStep(steps_run); !s.ok()) return s;
      if ((options.max_steps > 0 && progress.steps >= options.max_steps) || trace.finished()) {
        if (on_epoch) {
          EpochReport report;
          report.epoch = epoch;
          report.positives = progress.seen;
          report.loss = progress.loss / static_cast<double>(std::max<int64_t>(1, progress.seen));
          report.seconds = seconds;
          on_epoch(report);
        }
        return model;
      }
      if (on_step) {
        StepReport step;
        step.epoch = epoch;
        step.positives_done = progress.seen;
        step.positives_total = static_cast<int64_t>(positives.size());
        step.steps_done = progress.steps;
        step.loss = step_loss;
        step.seconds = seconds;
        on_step(step);
      }
    }
    EpochReport ended;
    ended.epoch = epoch;
    ended.positives = progress.seen;
    absl::StatusOr<EpochReport> report = run.EndEpoch(
        ended, options.epochs, options.eval_every, progress.steps, progress.loss,
        MrrValidation(run, valid_facts.size(),
                      [&] { return EvaluatePath(*model, graph, {}, valid_facts, validation); }),
        start);
    if (!report.ok()) return report.status();
    if (on_epoch) on_epoch(*report);
  }
  run.Finish();
  return model;
}

}  // namespace grail
