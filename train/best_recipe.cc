#include "train/best_recipe.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/elapsed.h"
#include "common/seeded_random.h"
#include "eval/ensemble_evaluation.h"
#include "graph/model_graph.h"
#include "model/core/runtime.h"
#include "model/ensemble/ensemble_fit.h"
#include "model/families.h"

namespace grail {
namespace {

constexpr const char* kCandidateNames[] = {"ultra", "path", "ensemble"};

absl::Status ValidateOptions(const BestRecipeOptions& o) {
  if (o.ultra.init.empty()) {
    return absl::InvalidArgumentError("the recipe fine-tunes ULTRA: give its archive (--init)");
  }
  if (!(o.time_budget_seconds > 0)) {
    return absl::InvalidArgumentError("the recipe needs a time budget > 0 seconds");
  }
  if (!(o.ultra_share > 0) || !(o.reserve_share >= 0) || !(o.ultra_share + o.reserve_share < 1)) {
    return absl::InvalidArgumentError(
        "ULTRA's share of the budget must be > 0, the reserve's >= 0, and together < 1");
  }
  if (o.max_judge_facts < 2 || o.max_fit_facts < 2) {
    return absl::InvalidArgumentError("the judge and the fit need at least 2 facts each");
  }
  if (!(o.margin >= 0)) return absl::InvalidArgumentError("the margin must be >= 0");
  return absl::OkStatus();
}

// `valid` split by the seed: the judge's part first (half, at most max_judge_facts), then the
// fit's (the rest).
std::pair<std::vector<NamedTriple>, std::vector<NamedTriple>> SplitValid(
    absl::Span<const NamedTriple> valid, const BestRecipeOptions& options) {
  std::vector<uint32_t> order(valid.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  SeededRandom random(options.seed ^ 0x6a75646765ULL);
  random.Shuffle(order);
  const size_t judged = std::min(options.max_judge_facts, valid.size() / 2);
  std::vector<NamedTriple> judge, fit;
  for (size_t i = 0; i < order.size(); ++i) {
    (i < judged ? judge : fit).push_back(valid[order[i]]);
  }
  return {std::move(judge), std::move(fit)};
}

}  // namespace

std::string ChooseBest(absl::Span<const BestRecipeResult::Candidate> candidates, double margin) {
  const BestRecipeResult::Candidate* better = nullptr;
  for (const BestRecipeResult::Candidate& c : candidates) {
    if (c.name != "ensemble" && (better == nullptr || c.judge_mrr > better->judge_mrr)) {
      better = &c;
    }
  }
  if (better == nullptr) return "ensemble";
  for (const BestRecipeResult::Candidate& c : candidates) {
    if (c.name == "ensemble" && c.judge_mrr > better->judge_mrr + margin) return c.name;
  }
  return better->name;
}

const PathModel* BestRecipeResult::ChosenMember() const {
  if (chosen == "ensemble") return nullptr;
  return ensemble->path_member(chosen == kCandidateNames[0] ? 0 : 1);
}

absl::Status BestRecipeResult::Save(const std::string& path) const {
  const PathModel* member = ChosenMember();
  return member != nullptr ? member->Save(path) : ensemble->Save(path);
}

int64_t BestRecipeResult::num_parameters() const {
  const PathModel* member = ChosenMember();
  return member != nullptr ? member->num_parameters() : ensemble->num_parameters();
}

Json BestRecipeResult::ToJson(double time_budget_seconds) const {
  Json candidates_json = Json::array();
  for (const Candidate& c : candidates) {
    candidates_json.push_back({{"name", c.name},
                               {"judge_mrr", RoundTo(c.judge_mrr, 6)},
                               {"seconds", RoundTo(c.seconds, 1)},
                               {"epochs", c.epochs}});
  }
  Json weights = Json::array();
  for (double w : ensemble->rule().weights) weights.push_back(w);
  return Json{{"chosen", chosen},
              {"candidates", std::move(candidates_json)},
              {"ensemble_rule", {{"weights", std::move(weights)}, {"bias", ensemble->rule().bias}}},
              {"fit_facts", fit_facts},
              {"judge_facts", judge_facts},
              {"seconds", RoundTo(seconds, 1)},
              {"time_budget_seconds", time_budget_seconds}};
}

absl::StatusOr<BestRecipeResult> RunBestRecipe(
    const IndexedTriples& train, absl::Span<const NamedTriple> train_facts,
    absl::Span<const NamedTriple> valid, const BestRecipeOptions& options,
    const std::function<void(const std::string&, int)>& on_phase,
    const std::function<void(const EpochReport&)>& on_epoch,
    const std::function<void(const StepReport&)>& on_step) {
  if (absl::Status s = ValidateOptions(options); !s.ok()) return s;
  {  // before any training: is it ULTRA's?
    absl::StatusOr<AnyModel> init = LoadAnyModel(options.ultra.init, options.ultra.device);
    if (!init.ok()) return init.status();
    if (init->path == nullptr || !init->path->open_vocabulary()) {
      return absl::InvalidArgumentError(absl::StrCat(
          options.ultra.init, " is not ULTRA's archive (grail-tools import-ultra makes one)"));
    }
  }
  const auto start = std::chrono::steady_clock::now();
  auto phase = [&](const std::string& what, int epochs) {
    if (on_phase) on_phase(what, epochs);
  };
  auto [judge_named, fit_named] = SplitValid(valid, options);
  BestRecipeResult result;
  const std::string fingerprint = FingerprintFacts(train_facts);
  // The ensemble's vocabulary is the path model's, the training graph's.
  const ModelGraph indexed(train_facts, train.relations.names());
  const std::vector<Triple> judge = indexed.NewFacts(judge_named);
  const std::vector<Triple> fit = indexed.NewFacts(fit_named);
  if (judge.size() < 2 || fit.size() < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the recipe needs at least 4 validation facts on the training graph's entities and "
        "relations (2 to fit, 2 to judge); ",
        judge.size() + fit.size(), " of ", valid.size(), " are"));
  }

  // 1. ULTRA, fine-tuned by its recipe within its share.
  int epochs = 0;
  auto count_epochs = [&](const EpochReport& r) {
    epochs = r.epoch;
    if (on_epoch) on_epoch(r);
  };
  PathTrainOptions ultra_options = options.ultra;
  ultra_options.time_budget_seconds = options.ultra_share * options.time_budget_seconds;
  phase(absl::StrCat("fine-tuning ULTRA (", options.ultra.init, ") for at most ",
                     static_cast<int64_t>(ultra_options.time_budget_seconds), " s"),
        ultra_options.epochs);
  absl::StatusOr<std::unique_ptr<PathModel>> ultra =
      TrainPath(train, fit_named, ultra_options, count_epochs, on_step);
  if (!ultra.ok()) return ultra.status();
  result.candidates.push_back({kCandidateNames[0], 0, SecondsSince(start), epochs});

  // 2. The path preset, in what is left but the reserve.
  PathTrainOptions path_options = options.path;
  path_options.init.clear();
  path_options.time_budget_seconds =
      (1 - options.reserve_share) * options.time_budget_seconds - SecondsSince(start);
  if (path_options.time_budget_seconds < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the time budget (", options.time_budget_seconds,
        " s) left the path model no time after ULTRA's fine-tuning: give a larger one"));
  }
  phase(absl::StrCat("training the path model for at most ",
                     static_cast<int64_t>(path_options.time_budget_seconds), " s"),
        path_options.epochs);
  epochs = 0;
  const auto path_start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<PathModel>> path =
      TrainPath(train, fit_named, path_options, count_epochs, on_step);
  if (!path.ok()) return path.status();
  result.candidates.push_back({kCandidateNames[1], 0, SecondsSince(path_start), epochs});

  // 3. The ensemble's rule on the fit's part; every candidate judged on the judge's.
  (*ultra)->set_training_fingerprint(fingerprint);
  (*path)->set_training_fingerprint(fingerprint);
  std::vector<std::unique_ptr<PathModel>> members;
  members.push_back(*std::move(ultra));
  members.push_back(*std::move(path));
  absl::StatusOr<std::unique_ptr<EnsembleModel>> ensemble =
      EnsembleModel::Create(std::move(members), LinearFusion{{1.0, 1.0}, 0});
  if (!ensemble.ok()) return ensemble.status();
  result.ensemble = *std::move(ensemble);
  const EnsembleModel& model = *result.ensemble;
  phase("fitting the ensemble's rule and judging the three on held-out validation facts", 0);
  const auto fit_start = std::chrono::steady_clock::now();
  result.judge_facts = judge.size();
  result.fit_facts = std::min(fit.size(), options.max_fit_facts);
  ValidationQueryOptions query_options;
  query_options.max_facts = options.max_fit_facts;
  query_options.scoring.threads = options.threads;
  SetComputeThreads(1);
  const absl::Span<const std::string> entities = indexed.indexed.entities.names();
  const absl::Span<const std::string> relations = indexed.indexed.relations.names();
  absl::StatusOr<std::vector<QueryCandidates>> fit_queries = CollectValidationQueries(
      model, indexed.graph, entities, relations, fit, judge, query_options);
  if (!fit_queries.ok()) return fit_queries.status();
  query_options.max_facts = options.max_judge_facts;
  absl::StatusOr<std::vector<QueryCandidates>> judge_queries = CollectValidationQueries(
      model, indexed.graph, entities, relations, judge, fit, query_options);
  if (!judge_queries.ok()) return judge_queries.status();
  EnsembleFitOptions fit_options;
  fit_options.seed = options.seed;
  absl::StatusOr<EnsembleFit> fitted = FitEnsembleRule(*fit_queries, 2, fit_options);
  if (!fitted.ok()) return fitted.status();
  if (absl::Status s = result.ensemble->SetRule(fitted->rule); !s.ok()) return s;
  result.candidates[0].judge_mrr = CandidateMrr(*judge_queries, std::vector<double>{1.0, 0.0});
  result.candidates[1].judge_mrr = CandidateMrr(*judge_queries, std::vector<double>{0.0, 1.0});
  result.candidates.push_back({kCandidateNames[2],
                               CandidateMrr(*judge_queries, fitted->rule.weights),
                               SecondsSince(fit_start), 0});

  result.chosen = ChooseBest(result.candidates, options.margin);
  result.seconds = SecondsSince(start);
  return result;
}

}  // namespace grail
