// grail-train: trains GraIL on a triple file and exports the TorchScript model.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/command_line.h"
#include "common/durable_file.h"
#include "common/json.h"
#include "graph/triple_file.h"
#include "model/core/blas_kernels.h"
#include "model/core/runtime.h"
#include "model/kge/kge_model.h"
#include "tools/training_presets.h"
#include "tools/training_progress.h"
#include "train/best_recipe.h"
#include "train/challenger.h"
#include "train/grail_trainer.h"
#include "train/path_trainer.h"

ABSL_FLAG(std::string, family, "grail",
          "model family: grail (GraIL, enclosing subgraphs), path (path-based scorer that "
          "ranks every entity in one pass) or ultra (fine-tune an ULTRA archive given by "
          "--init; see docs/training.md)");
ABSL_FLAG(std::string, train, "", "training graph (triple file); its facts are the positives");
ABSL_FLAG(std::string, valid, "", "validation facts (triple file), scored for AUC-PR");
ABSL_FLAG(std::string, out, "", "where to write the model (TorchScript archive, .pt)");
ABSL_FLAG(std::string, init, "",
          "path and ultra families: start from this archive (its network and parameters; the "
          "network's flags are ignored), e.g. an ULTRA archive to fine-tune");
ABSL_FLAG(int, epochs, 0, "training epochs (0: the family's default, grail 50, path 20)");
ABSL_FLAG(uint64_t, seed, 0, "seed for initialisation, negatives and order");
ABSL_FLAG(int, hops, 3, "k: subgraph radius and label range");
ABSL_FLAG(int, max_nodes_per_hop, 0, "cap on newly reached nodes per hop (0: none)");
ABSL_FLAG(int, threads, 2, "threads: one extracts subgraphs, the rest compute");
ABSL_FLAG(bool, no_attention, false, "ablation: no edge attention");
ABSL_FLAG(bool, no_labels, false, "ablation: constant node labels (1, 1)");
ABSL_FLAG(bool, no_enclosing, false, "ablation: k-hop union instead of the enclosing subgraph");
ABSL_FLAG(bool, exclude_target_edge, false,
          "extract each positive's subgraph without the fact itself (re-added as target edge)");
ABSL_FLAG(int, batch_size, 0,
          "positives per step for grail, queries per step for path (0: the family's default, "
          "grail 16, path 32)");
ABSL_FLAG(int, accumulate, 1,
          "path family: passes of --batch-size queries per optimiser step, their gradients "
          "summed: the step of a batch of batch-size x accumulate queries in the memory of one "
          "pass (NBFNet's published runs: 4 GPUs of --batch-size each, so --accumulate 4)");
ABSL_FLAG(double, lr, 0, "Adam learning rate (0: the family's default, grail 0.01, path 5e-3)");
ABSL_FLAG(double, l2, 5e-4, "L2 weight decay");
ABSL_FLAG(double, margin, 10, "margin of the ranking loss");
ABSL_FLAG(double, clip, 1000, "gradient-norm clip (0: none, as the reference code)");
ABSL_FLAG(int, eval_every, 0,
          "epochs between valid evaluations (0: the family's default, grail 3, path 1)");
ABSL_FLAG(int64_t, eval_every_steps, 0,
          "GraIL: validate every N training steps of the run instead of every --eval-every "
          "epochs (the reference code: 455)");
ABSL_FLAG(std::string, select_metric, "auc_pr",
          "GraIL: the validation figure that picks the best model, auc_pr or auc_roc (the "
          "reference code: auc_roc)");
ABSL_FLAG(bool, dropout_off_after_eval, false,
          "GraIL: after a validation, train the rest of the epoch without edge dropout (as the "
          "reference code does)");
ABSL_FLAG(bool, fixed_negatives, false,
          "GraIL: draw each positive's negative once and reuse it every epoch (as the reference "
          "code does)");
ABSL_FLAG(int, layers, 0, "GNN layers (0: the family's default, grail 3, path 6)");
ABSL_FLAG(int, dim, 32, "hidden size of every layer");
ABSL_FLAG(int, bases, 4, "R-GCN bases");
ABSL_FLAG(double, edge_dropout, 0.5, "edge dropout at training time");
ABSL_FLAG(bool, zero_without_in_edges, false,
          "a node with no in-edge in its subgraph has state 0 (the reference code's DGL "
          "behaviour) instead of ReLU(W_self h)");
ABSL_FLAG(std::string, device, "cpu", "cpu or cuda[:N]");
ABSL_FLAG(std::string, node_features, "",
          "GraIL: early fusion (the paper's GraIL++): concatenate this KGE model's entity "
          "embeddings (grail-kge-train's archive) to every node's labels, with zeros and a flag "
          "bit for an entity it has none for; the archive carries them");
ABSL_FLAG(bool, pna, false, "path family: PNA aggregation instead of the sum");
ABSL_FLAG(bool, free_relations, false,
          "path family: one learnt vector per relation instead of vectors computed from the "
          "query relation");
ABSL_FLAG(int, negatives, 32, "path family: negatives per query");
ABSL_FLAG(bool, reach_mask, true,
          "path family: entities no path of the model's length reaches keep state 0 and share "
          "one score, so a query touches only its source's neighbourhood (false: every entity "
          "is updated at every layer and scored on its own, as NBFNet does; a query then runs "
          "over the whole graph)");
ABSL_FLAG(bool, reach_feature, false,
          "path family: the scoring MLP also reads whether a path of the model's length from "
          "the query's source reaches the entity, so an unreached entity's own prior cannot "
          "outrank reached ones unless training says so (meant for --reach-mask=false)");
ABSL_FLAG(int, detached_walks, 0,
          "path family: add this many detached copies of short walks (components of 2 to 4 "
          "entities) per relation to the message graph, their entities drawn as negatives only, "
          "so that a model without the reach mask sees entities no query reaches in small "
          "components (meant for --reach-mask=false; 0: none)");
ABSL_FLAG(double, prune_node_ratio, 0,
          "path family: a learned priority, as A*Net trains it: each layer propagates only from "
          "this share of the graph's entities, those the model's own score ranks first, each "
          "message weighted by its sender's; the server prunes a call's layers to its budget "
          "the same way (in (0, 1]; 0: no learned priority)");
ABSL_FLAG(double, prune_degree_ratio, 1,
          "path family, with --prune-node-ratio: each pruned layer passes messages along at "
          "most this many times the chosen entities' count times the mean degree of edges, "
          "those into the entities of highest priority");
ABSL_FLAG(double, adversarial_temperature, 0,
          "path family: self-adversarial weighting of the negatives at this temperature (0: "
          "uniform weights)");
ABSL_FLAG(bool, remove_one_hop, true,
          "path family: leave every fact between a query's source and its answer or negatives "
          "out of its message graph (false: only the predicted fact)");
ABSL_FLAG(bool, source_negatives, false,
          "path family: a query's source may be drawn as one of its negatives, like any entity "
          "that does not answer it, as NBFNet's trainer draws them (false: never)");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "write a checkpoint after every epoch (and, with --checkpoint-every-steps, within one) "
          "into this directory");
ABSL_FLAG(int, checkpoint_every_steps, 0,
          "path family: also checkpoint every N steps within an epoch (0: at epochs' ends only), "
          "so a run killed in a long epoch resumes from its last N steps");
ABSL_FLAG(bool, resume, false,
          "continue from the checkpoint in --checkpoint-dir (if it holds one); the run's data "
          "and options must be the checkpoint's");
ABSL_FLAG(std::string, plot, "",
          "after training, draw loss and valid AUC-PR per epoch into this PNG (gnuplot)");
ABSL_FLAG(int64_t, max_steps, 0,
          "path family: stop after this many training steps, without validation, and write the "
          "model as it is (0: train every epoch); for measuring a step");
ABSL_FLAG(int, input_threads, 0,
          "path family: steps whose batches are made ahead, each on its own thread (0: 1 on "
          "the CPU, 4 on a GPU)");
ABSL_FLAG(std::string, batch_layout, "cheaper",
          "path family: a step's batch on one graph shared by its queries or their disjoint "
          "neighbourhoods: cheaper (by the cost rule), shared or disjoint (to compare)");
ABSL_FLAG(std::string, trace, "",
          "path family: run --trace-after steps, profile the next --trace-steps (every operator "
          "on the host; on a GPU every kernel too), write them to this file as a Chrome trace "
          "and stop (bench/step_trace.py sums it up; needs a LibTorch with Kineto, as "
          "PyTorch's own)");
ABSL_FLAG(int64_t, trace_after, 10, "with --trace: steps run before the traced ones");
ABSL_FLAG(int64_t, trace_steps, 5, "with --trace: steps traced");
ABSL_FLAG(std::string, message_passing, "fused",
          "path family: fused (the fused operator, one graph per batch where cheaper) or "
          "per-edge (every message materialised, one graph per query: the formulation before "
          "the operator, for comparison)");
ABSL_FLAG(absl::Duration, time_budget, absl::ZeroDuration(),
          "train for at most about this long (e.g. 90m, 2h): the epoch under way when it runs out "
          "ends there, validated, and the best model is kept (path-based families); --family "
          "best's whole budget (0: none)");
ABSL_FLAG(std::string, report, "",
          "--family best: where to write what it did (JSON: each candidate's MRR on the held-out "
          "validation facts, its seconds and epochs, the ensemble's rule, the one kept)");
ABSL_FLAG(bool, progress, true,
          "on a terminal, a progress bar with steps/s and ETA within each epoch (plain epoch "
          "lines when stderr is not a terminal)");

namespace {

// What a family is trained with when a flag is left at 0.
struct FamilyDefaults {
  int epochs;
  int batch_size;
  int layers;
  int eval_every;
  double learning_rate;
  double adversarial_temperature;
};

// The families grail-train trains. ULTRA is fine-tuned from an archive (grail-tools
// import-ultra) with the path family's trainer and its own recipe; --init starts either
// path-based family from an archive.
struct TrainFamily {
  const char* name;
  bool path_based;
  FamilyDefaults defaults;
};
constexpr TrainFamily kFamilies[] = {
    {"grail", false, {50, 16, 3, 3, 0.01, 0.0}},
    {"path", true, {20, 32, 6, 1, 5e-3, 0.0}},
    {"ultra", true, {1, 16, 6, 1, 5e-4, 1.0}},  // UltraFineTuneRecipe's (train/challenger.h)
    // train/best_recipe.h: ULTRA fine-tuned by its recipe, a path model by the flags, and
    // their ensemble, the best of the three on held-out validation facts kept.
    {"best", true, {20, 32, 6, 1, 5e-3, 0.0}},
};

// A flag only some families take, and whether the command line set it.
struct FamilyFlag {
  const char* name;
  bool path_based;  // taken by the path-based families (path, ultra), else by GraIL only
  std::function<bool()> set;
};
const std::vector<FamilyFlag>& FamilyFlags() {
  static const auto* const flags = new std::vector<FamilyFlag>{
      {"--eval-every-steps", false, [] { return absl::GetFlag(FLAGS_eval_every_steps) != 0; }},
      {"--select-metric", false, [] { return absl::GetFlag(FLAGS_select_metric) != "auc_pr"; }},
      {"--dropout-off-after-eval", false,
       [] { return absl::GetFlag(FLAGS_dropout_off_after_eval); }},
      {"--fixed-negatives", false, [] { return absl::GetFlag(FLAGS_fixed_negatives); }},
      {"--node-features", false, [] { return !absl::GetFlag(FLAGS_node_features).empty(); }},
      {"--init", true, [] { return !absl::GetFlag(FLAGS_init).empty(); }},
      {"--checkpoint-every-steps", true,
       [] { return absl::GetFlag(FLAGS_checkpoint_every_steps) != 0; }},
      {"--max-steps", true, [] { return absl::GetFlag(FLAGS_max_steps) != 0; }},
      {"--time-budget", true,
       [] { return absl::GetFlag(FLAGS_time_budget) != absl::ZeroDuration(); }},
      {"--message-passing", true, [] { return absl::GetFlag(FLAGS_message_passing) != "fused"; }},
      {"--input-threads", true, [] { return absl::GetFlag(FLAGS_input_threads) != 0; }},
      {"--batch-layout", true, [] { return absl::GetFlag(FLAGS_batch_layout) != "cheaper"; }},
      {"--accumulate", true, [] { return absl::GetFlag(FLAGS_accumulate) != 1; }},
      {"--trace", true, [] { return !absl::GetFlag(FLAGS_trace).empty(); }},
  };
  return *flags;
}

// The family --family names, or a usage error: an unknown family, a flag of another family,
// a value out of its choices.
absl::StatusOr<const TrainFamily*> ChosenFamily() {
  const std::string name = absl::GetFlag(FLAGS_family);
  const TrainFamily* family = nullptr;
  for (const TrainFamily& f : kFamilies) {
    if (name == f.name) family = &f;
  }
  if (family == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--family must be grail, path, ultra or best, got '", name, "'"));
  }
  if ((name == "ultra" || name == "best") && absl::GetFlag(FLAGS_init).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--family ", name,
        " fine-tunes ULTRA's archive: pass --init MODEL.pt (grail-tools import-ultra makes one "
        "from a released checkpoint)"));
  }
  if (name == "best") {
    if (absl::GetFlag(FLAGS_time_budget) <= absl::ZeroDuration()) {
      return absl::InvalidArgumentError(
          "--family best runs within a time budget: pass --time-budget (e.g. 2h; the preset's)");
    }
    const std::pair<const char*, bool> refused[] = {
        {"--checkpoint-dir", !absl::GetFlag(FLAGS_checkpoint_dir).empty()},
        {"--max-steps", absl::GetFlag(FLAGS_max_steps) != 0},
        {"--trace", !absl::GetFlag(FLAGS_trace).empty()}};
    for (const auto& [flag, set] : refused) {
      if (set) {
        return absl::InvalidArgumentError(absl::StrCat(
            flag, " is not one of --family best's options: it trains two models in one budget"));
      }
    }
  }
  if (!absl::GetFlag(FLAGS_report).empty() && name != "best") {
    return absl::InvalidArgumentError("--report is written by --family best only");
  }
  for (const FamilyFlag& flag : FamilyFlags()) {
    if (flag.path_based != family->path_based && flag.set()) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag.name, " is one of the options of the ",
                       flag.path_based ? "path family (--family path or ultra)" : "GraIL family",
                       ", not of --family ", name));
    }
  }
  struct Choice {
    const char* flag;
    std::string value;
    std::vector<std::string> allowed;
  };
  for (const Choice& c : std::vector<Choice>{
           {"--select-metric", absl::GetFlag(FLAGS_select_metric), {"auc_pr", "auc_roc"}},
           {"--batch-layout", absl::GetFlag(FLAGS_batch_layout), {"cheaper", "shared", "disjoint"}},
           {"--message-passing", absl::GetFlag(FLAGS_message_passing), {"fused", "per-edge"}}}) {
    if (std::find(c.allowed.begin(), c.allowed.end(), c.value) == c.allowed.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          c.flag, " must be ", absl::StrJoin(c.allowed.begin(), c.allowed.end() - 1, ", "), " or ",
          c.allowed.back(), ", got '", c.value, "'"));
    }
  }
  if (absl::GetFlag(FLAGS_trace_after) < 0 || absl::GetFlag(FLAGS_trace_steps) < 1) {
    return absl::InvalidArgumentError("--trace-after must be >= 0 and --trace-steps >= 1");
  }
  return family;
}

// A flag left at 0 takes the family's default.
template <typename T>
T Or(T value, T family_default) {
  return value != 0 ? value : family_default;
}

grail::PathTrainOptions PathOptions(const TrainFamily& family, bool remove_one_hop_given) {
  const FamilyDefaults& d = family.defaults;
  const bool ultra = std::string(family.name) == "ultra";
  grail::PathTrainOptions options;
  options.model.num_layers = Or(absl::GetFlag(FLAGS_layers), d.layers);
  options.model.dim = absl::GetFlag(FLAGS_dim);
  options.model.pna = absl::GetFlag(FLAGS_pna);
  options.model.dependent = !absl::GetFlag(FLAGS_free_relations);
  options.model.reach_mask = absl::GetFlag(FLAGS_reach_mask);
  options.model.reach_feature = absl::GetFlag(FLAGS_reach_feature);
  options.model.priority = absl::GetFlag(FLAGS_prune_node_ratio) != 0;
  if (options.model.priority) {
    options.model.prune_node_ratio = absl::GetFlag(FLAGS_prune_node_ratio);
    options.model.prune_degree_ratio = absl::GetFlag(FLAGS_prune_degree_ratio);
  }
  options.model.message_passing = absl::GetFlag(FLAGS_message_passing) == "fused"
                                      ? grail::PathMessagePassing::kFused
                                      : grail::PathMessagePassing::kPerEdge;
  options.epochs = Or(absl::GetFlag(FLAGS_epochs), d.epochs);
  options.batch_size = Or(absl::GetFlag(FLAGS_batch_size), d.batch_size);
  options.accumulate = absl::GetFlag(FLAGS_accumulate);
  options.negatives = absl::GetFlag(FLAGS_negatives);
  options.learning_rate = Or(absl::GetFlag(FLAGS_lr), d.learning_rate);
  options.adversarial_temperature =
      Or(absl::GetFlag(FLAGS_adversarial_temperature), d.adversarial_temperature);
  // ULTRA's trainer leaves out only the predicted fact, not every fact of its two entities.
  options.remove_one_hop =
      ultra && !remove_one_hop_given ? false : absl::GetFlag(FLAGS_remove_one_hop);
  options.init = absl::GetFlag(FLAGS_init);
  options.detached_walks = absl::GetFlag(FLAGS_detached_walks);
  options.source_negatives = absl::GetFlag(FLAGS_source_negatives);
  options.eval_every = Or(absl::GetFlag(FLAGS_eval_every), d.eval_every);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.device = absl::GetFlag(FLAGS_device);
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.resume = absl::GetFlag(FLAGS_resume);
  options.checkpoint_every_steps = absl::GetFlag(FLAGS_checkpoint_every_steps);
  options.max_steps = absl::GetFlag(FLAGS_max_steps);
  options.time_budget_seconds = absl::ToDoubleSeconds(absl::GetFlag(FLAGS_time_budget));
  options.input_threads = absl::GetFlag(FLAGS_input_threads);
  const std::string layout = absl::GetFlag(FLAGS_batch_layout);
  options.layout = layout == "shared"     ? grail::PathLayout::kShared
                   : layout == "disjoint" ? grail::PathLayout::kDisjoint
                                          : grail::PathLayout::kCheaper;
  options.trace = {absl::GetFlag(FLAGS_trace), absl::GetFlag(FLAGS_trace_after),
                   absl::GetFlag(FLAGS_trace_steps)};
  return options;
}

// ULTRA's recipe inside --family best: train/challenger.h's, the run's own settings (seed,
// threads, device, checkpoints) as the command line gives them.
grail::PathTrainOptions UltraRecipe(grail::PathTrainOptions flags) {
  return grail::UltraFineTuneRecipe(std::move(flags));
}

// GraIL's options; with --node-features, the KGE archive's entity embeddings read.
absl::StatusOr<grail::GrailTrainOptions> GrailOptions(const TrainFamily& family) {
  const FamilyDefaults& d = family.defaults;
  grail::GrailTrainOptions options;
  options.model.hops = absl::GetFlag(FLAGS_hops);
  options.model.max_nodes_per_hop = absl::GetFlag(FLAGS_max_nodes_per_hop);
  options.model.enclosing = !absl::GetFlag(FLAGS_no_enclosing);
  options.model.node_labels = !absl::GetFlag(FLAGS_no_labels);
  options.model.attention = !absl::GetFlag(FLAGS_no_attention);
  options.model.num_layers = Or(absl::GetFlag(FLAGS_layers), d.layers);
  options.model.dim = absl::GetFlag(FLAGS_dim);
  options.model.num_bases = absl::GetFlag(FLAGS_bases);
  options.model.edge_dropout = absl::GetFlag(FLAGS_edge_dropout);
  options.model.zero_without_in_edges = absl::GetFlag(FLAGS_zero_without_in_edges);
  options.epochs = Or(absl::GetFlag(FLAGS_epochs), d.epochs);
  options.batch_size = Or(absl::GetFlag(FLAGS_batch_size), d.batch_size);
  options.learning_rate = Or(absl::GetFlag(FLAGS_lr), d.learning_rate);
  options.l2 = absl::GetFlag(FLAGS_l2);
  options.margin = absl::GetFlag(FLAGS_margin);
  options.clip_norm = absl::GetFlag(FLAGS_clip);
  options.eval_every = Or(absl::GetFlag(FLAGS_eval_every), d.eval_every);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.exclude_target_edge = absl::GetFlag(FLAGS_exclude_target_edge);
  options.eval_every_steps = absl::GetFlag(FLAGS_eval_every_steps);
  options.select_metric = absl::GetFlag(FLAGS_select_metric) == "auc_roc"
                              ? grail::SelectMetric::kAucRoc
                              : grail::SelectMetric::kAucPr;
  options.dropout_off_after_eval = absl::GetFlag(FLAGS_dropout_off_after_eval);
  options.fixed_negatives = absl::GetFlag(FLAGS_fixed_negatives);
  options.threads = absl::GetFlag(FLAGS_threads);
  options.device = absl::GetFlag(FLAGS_device);
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.resume = absl::GetFlag(FLAGS_resume);
  if (const std::string path = absl::GetFlag(FLAGS_node_features); !path.empty()) {
    absl::StatusOr<std::unique_ptr<grail::KgeModel>> kge = grail::KgeModel::Load(path);
    if (!kge.ok()) return kge.status();
    auto features = std::make_shared<grail::NodeFeatures>();
    features->entities = (*kge)->entities();
    features->dim = (*kge)->config().entity_width();
    features->values.reserve(features->entities.size() * features->dim);
    for (grail::EntityId e = 0; e < (*kge)->num_entities(); ++e) {
      const std::vector<float> row = (*kge)->EntityEmbedding(e);
      features->values.insert(features->values.end(), row.begin(), row.end());
    }
    options.model.node_feature_dim = features->dim;
    options.node_features = std::move(features);
    std::fprintf(stderr, "grail-train: node features from %s: %zu entities, %d numbers each\n",
                 path.c_str(), options.node_features->entities.size(),
                 options.model.node_feature_dim);
  }
  return options;
}

// Trains `family` on `indexed` and saves the model, with the training facts' fingerprint, to
// `out`; its parameter count in `parameters`.
absl::Status TrainAndSave(const TrainFamily& family, bool remove_one_hop_given,
                          const grail::IndexedTriples& indexed,
                          const std::vector<grail::NamedTriple>& train,
                          const std::vector<grail::NamedTriple>& valid, const std::string& out,
                          const std::function<void(const grail::EpochReport&)>& report,
                          const std::function<void(const grail::StepReport&)>& step,
                          const std::function<void(int)>& on_epochs, int64_t* parameters) {
  auto save = [&](auto& model) {
    model.set_training_fingerprint(grail::FingerprintFacts(train));
    *parameters = model.num_parameters();
    return model.Save(out);
  };
  if (std::string(family.name) == "best") {
    grail::BestRecipeOptions options;
    options.ultra = UltraRecipe(PathOptions(family, remove_one_hop_given));
    options.path = PathOptions(family, remove_one_hop_given);
    options.path.init.clear();
    options.time_budget_seconds = options.path.time_budget_seconds;
    options.seed = options.path.seed;
    options.threads = options.path.threads;
    auto phase = [&on_epochs](const std::string& what, int epochs) {
      std::fprintf(stderr, "grail-train: best: %s\n", what.c_str());
      if (epochs > 0) on_epochs(epochs);
    };
    absl::StatusOr<grail::BestRecipeResult> result =
        grail::RunBestRecipe(indexed, train, valid, options, phase, report, step);
    if (!result.ok()) return result.status();
    for (const grail::BestRecipeResult::Candidate& c : result->candidates) {
      std::fprintf(stderr, "grail-train: best: %-8s MRR on %zu held-out validation facts %.4f\n",
                   c.name.c_str(), result->judge_facts, c.judge_mrr);
    }
    std::fprintf(stderr, "grail-train: best: kept %s (%.0f s of the %.0f s budget)\n",
                 result->chosen.c_str(), result->seconds, options.time_budget_seconds);
    *parameters = result->num_parameters();
    if (absl::Status s = result->Save(out); !s.ok()) return s;
    if (const std::string path = absl::GetFlag(FLAGS_report); !path.empty()) {
      return grail::WriteAndReplaceFile(
          path, grail::JsonLine(result->ToJson(options.time_budget_seconds)) + "\n");
    }
    return absl::OkStatus();
  }
  if (family.path_based) {
    absl::StatusOr<std::unique_ptr<grail::PathModel>> model =
        grail::TrainPath(indexed, valid, PathOptions(family, remove_one_hop_given), report, step);
    if (!model.ok()) return model.status();
    return save(**model);
  }
  absl::StatusOr<grail::GrailTrainOptions> options = GrailOptions(family);
  if (!options.ok()) return options.status();
  absl::StatusOr<std::unique_ptr<grail::GrailModel>> model =
      grail::TrainGrail(indexed, valid, *options, report, step);
  if (!model.ok()) return model.status();
  return save(**model);
}

}  // namespace

int main(int argc, char** argv) {
  grail::UseFastestBlasKernels(argv);  // before anything else: it may start the program again
  static const std::string usage = absl::StrCat(
      "grail-train --train FILE --valid FILE --out MODEL.pt [--preset NAME] [--seed S]\n"
      "  [--threads T]\n"
      "presets (flags given beside one win over its own):\n",
      grail::DescribeTrainingPresets(),
      "or the flags one by one: [--family grail|path|ultra] [--epochs N]\n"
      "  GraIL: [--hops K] [--no-attention] [--no-labels] [--no-enclosing] "
      "[--exclude-target-edge]\n"
      "         the reference code's schedule: [--eval-every-steps 455] [--select-metric auc_roc]\n"
      "         [--clip 0] [--dropout-off-after-eval] [--fixed-negatives]\n"
      "  path:  [--layers 6] [--pna] [--negatives 32] [--adversarial-temperature T]\n"
      "         [--reach-mask=false [--reach-feature] [--detached-walks N]]\n"
      "         [--prune-node-ratio R [--prune-degree-ratio D]]\n"
      "  either: [--checkpoint-dir DIR [--resume]]; path: [--checkpoint-every-steps N]");
  absl::SetProgramUsageMessage(usage);
  // --preset NAME becomes its flags, put before the command line's own.
  const std::vector<std::string> given(argv, argv + argc);
  absl::StatusOr<std::vector<std::string>> expanded = grail::ExpandTrainingPreset(given);
  if (!expanded.ok()) {
    std::fprintf(stderr, "grail-train: %s\n", std::string(expanded.status().message()).c_str());
    return 2;
  }
  std::vector<char*> expanded_argv;
  for (std::string& arg : *expanded) expanded_argv.push_back(arg.data());
  expanded_argv.push_back(nullptr);
  if (*expanded != given) {  // say what the preset stands for
    std::fprintf(stderr, "grail-train: %s\n",
                 absl::StrJoin(expanded->begin() + 1, expanded->end(), " ").c_str());
  }
  argc = static_cast<int>(expanded->size());
  argv = expanded_argv.data();
  // Whether --remove-one-hop was given at all (ULTRA's default differs from the path family's).
  bool remove_one_hop_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    for (const char* name :
         {"--remove-one-hop", "--remove_one_hop", "--noremove-one-hop", "--noremove_one_hop"}) {
      if (arg.rfind(name, 0) == 0) remove_one_hop_given = true;
    }
  }
  grail::ParseCommandLine(argc, argv);
  grail::KeepFreedMemoryForReuse();
  const std::string train_path = absl::GetFlag(FLAGS_train);
  const std::string valid_path = absl::GetFlag(FLAGS_valid);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (train_path.empty() || out.empty()) {
    std::fprintf(stderr, "grail-train needs --train and --out (see --help)\n");
    return 2;
  }
  if (absl::Status usable = grail::CheckOutputPath(
          "out", out,
          {{"train", train_path}, {"valid", valid_path}, {"init", absl::GetFlag(FLAGS_init)}});
      !usable.ok()) {
    std::fprintf(stderr, "%s\n", std::string(usable.message()).c_str());
    return 2;
  }
  absl::StatusOr<const TrainFamily*> family = ChosenFamily();
  if (!family.ok()) {
    std::fprintf(stderr, "%s\n", std::string(family.status().message()).c_str());
    return 2;
  }
  if (!absl::GetFlag(FLAGS_plot).empty()) {
    if (absl::Status s = grail::CheckPlotter(); !s.ok()) {  // before hours of training
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 2;
    }
  }
  absl::StatusOr<std::vector<grail::NamedTriple>> train = grail::ReadTripleFile(train_path);
  if (!train.ok()) {
    std::fprintf(stderr, "%s\n", train.status().ToString().c_str());
    return 1;
  }
  std::vector<grail::NamedTriple> valid;
  if (!valid_path.empty()) {
    absl::StatusOr<std::vector<grail::NamedTriple>> read = grail::ReadTripleFile(valid_path);
    if (!read.ok()) {
      std::fprintf(stderr, "%s\n", read.status().ToString().c_str());
      return 1;
    }
    valid = *std::move(read);
  }
  grail::IndexedTriples indexed;
  grail::IndexTriples(*train, &indexed);
  std::fprintf(stderr,
               "grail-train: %s family; %u entities, %u relations, %zu facts; %zu valid facts; "
               "seed %llu\n",
               (*family)->name, indexed.entities.size(), indexed.relations.size(),
               indexed.triples.size(), valid.size(),
               static_cast<unsigned long long>(absl::GetFlag(FLAGS_seed)));

  int epochs = Or(absl::GetFlag(FLAGS_epochs), (*family)->defaults.epochs);
  const bool bar = absl::GetFlag(FLAGS_progress) && isatty(fileno(stderr));
  grail::ProgressBar progress(stderr, epochs);
  std::vector<grail::EpochReport> history;
  auto report = [&](const grail::EpochReport& r) {
    progress.Clear();
    history.push_back(r);
    std::fprintf(stderr, "%s\n", grail::EpochLine(r, epochs).c_str());
  };
  std::function<void(const grail::StepReport&)> step;
  if (bar) step = [&progress](const grail::StepReport& s) { progress.Step(s); };
  auto set_epochs = [&](int phase_epochs) {  // --family best's phases
    epochs = phase_epochs;
    progress.set_epochs(phase_epochs);
  };
  int64_t parameters = 0;
  if (absl::Status saved = TrainAndSave(**family, remove_one_hop_given, indexed, *train, valid, out,
                                        report, step, set_epochs, &parameters);
      !saved.ok()) {
    std::fprintf(stderr, "%s\n", saved.ToString().c_str());
    return 1;
  }
  if (absl::GetFlag(FLAGS_resume) && history.empty()) {  // every run that trains reports
    std::fprintf(stderr,
                 "nothing to train: the checkpoint in %s has done --epochs (%d) epochs or more; "
                 "its best model is the one saved\n",
                 absl::GetFlag(FLAGS_checkpoint_dir).c_str(), epochs);
  }
  std::fprintf(stderr, "saved %s (%lld parameters)\n", out.c_str(),
               static_cast<long long>(parameters));
  if (const std::string plot = absl::GetFlag(FLAGS_plot); !plot.empty()) {
    if (absl::Status s = grail::PlotTraining(history, plot); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "plotted %s\n", plot.c_str());
  }
  return 0;
}
