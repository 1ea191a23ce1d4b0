#include "train/challenger.h"

#include <algorithm>
#include <chrono>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "eval/path_evaluation.h"
#include "graph/relation_map.h"
#include "graph/static_graph.h"
#include "model/families.h"

namespace grail {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Json RankingJson(const EvaluationResult& result) {
  Json out = Json::object();
  if (!result.full) return out;
  out["mrr"] = result.full->mrr;
  out["hits_at_1"] = result.full->hits_at_1;
  out["hits_at_10"] = result.full->hits_at_10;
  return out;
}

}  // namespace

PathTrainOptions UltraFineTuneRecipe(PathTrainOptions base) {
  PathTrainOptions o = std::move(base);
  o.epochs = 1;
  o.batch_size = 16;
  o.accumulate = 1;
  o.learning_rate = 5e-4;
  o.adversarial_temperature = 1.0;
  o.eval_every = 1;
  o.remove_one_hop = false;
  o.detached_walks = 0;
  o.source_negatives = false;
  return o;
}

PathTrainOptions FineTuneRecipe(const PathModel& champion, PathTrainOptions base) {
  if (champion.open_vocabulary()) return UltraFineTuneRecipe(std::move(base));
  PathTrainOptions o = std::move(base);
  o.epochs = 20;
  o.batch_size = 64;
  o.accumulate = 1;
  o.learning_rate = 5e-4;
  o.adversarial_temperature = 0.5;
  o.eval_every = 1;
  o.remove_one_hop = false;
  return o;
}

Json Challenge::ToJson() const {
  Json out = {{"train_facts", train_facts},
              {"valid_facts", valid_facts},
              {"judge_facts", judge_facts},
              {"judge_unrankable", judge_unrankable},
              {"unknown_relation", unknown_relation},
              {"champion", RankingJson(champion)},
              {"challenger", RankingJson(challenger)},
              {"challenger_finite", finite},
              {"epochs", epochs},
              {"train_seconds", train_seconds},
              {"judge_seconds", judge_seconds}};
  if (!finite) out["challenger"]["mrr"] = 0.0;
  return out;
}

absl::StatusOr<Challenge> RunChallenge(absl::Span<const NamedTriple> facts,
                                       const ChallengeOptions& options,
                                       const std::function<void(const EpochReport&)>& on_epoch) {
  absl::StatusOr<AnyModel> loaded = LoadAnyModel(options.recipe.init, options.recipe.device);
  if (!loaded.ok()) return loaded.status();
  if (loaded->path == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.recipe.init,
        " is not a path-family archive (ULTRA's or a path preset's): only those are fine-tuned "
        "on the live graph"));
  }
  std::unique_ptr<PathModel> champion = std::move(loaded->path);
  const bool open = champion->open_vocabulary();

  // A closed vocabulary is the champion's, in its order (the trainer requires exactly it);
  // facts of other relations cannot be learnt or ranked by it.
  Challenge out;
  std::vector<NamedTriple> usable;
  usable.reserve(facts.size());
  const Vocabulary champion_relations(champion->relations());
  for (const NamedTriple& f : facts) {
    if (!open && !champion_relations.Find(f.relation)) {
      ++out.unknown_relation;
      continue;
    }
    usable.push_back(f);
  }
  const size_t cap = static_cast<size_t>(options.max_holdout_share * usable.size());
  out.judge_facts = std::min(options.judge_facts, cap);
  out.valid_facts = std::min(options.valid_facts, cap);
  if (usable.size() < out.judge_facts + out.valid_facts + 10 || out.judge_facts == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "too few facts to fine-tune and judge: ", usable.size(), " usable (", out.unknown_relation,
        " of relations the served model lacks); each held-out part takes "
        "at most ",
        options.max_holdout_share, " of them and training needs 10 more"));
  }
  out.train_facts = usable.size() - out.judge_facts - out.valid_facts;
  const absl::Span<const NamedTriple> all(usable);
  const absl::Span<const NamedTriple> train_named = all.subspan(0, out.train_facts);
  const absl::Span<const NamedTriple> valid_named = all.subspan(out.train_facts, out.valid_facts);
  const absl::Span<const NamedTriple> judge_named = all.subspan(out.train_facts + out.valid_facts);

  // Train on the oldest facts, validate on the next ones.
  IndexedTriples train;
  if (!open) train.relations = Vocabulary(champion->relations());
  IndexTriples(train_named, &train);
  PathTrainOptions recipe = options.recipe;
  const auto train_start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<PathModel>> trained =
      TrainPath(train, std::vector<NamedTriple>(valid_named.begin(), valid_named.end()), recipe,
                [&](const EpochReport& report) {
                  out.epochs = report.epoch;
                  if (on_epoch) on_epoch(report);
                });
  if (!trained.ok()) return trained.status();
  out.train_seconds = SecondsSince(train_start);
  out.model = *std::move(trained);
  out.finite = out.model->CheckFinite().ok();

  // Judge both on the newest facts, over the graph of everything older.
  IndexedTriples older;
  if (!open) older.relations = Vocabulary(champion->relations());
  IndexTriples(all.subspan(0, out.train_facts + out.valid_facts), &older);
  const StaticGraph graph(older.entities.size(), older.triples);
  std::vector<Triple> judge;
  for (const NamedTriple& f : judge_named) {
    const std::optional<EntityId> h = older.entities.Find(f.head);
    const std::optional<EntityId> t = older.entities.Find(f.tail);
    const std::optional<RelationId> r = older.relations.Find(f.relation);
    if (!h || !t || !r || *h == *t || graph.HasFact(*h, *r, *t)) {
      ++out.judge_unrankable;
      continue;
    }
    judge.push_back({*h, *r, *t});
  }
  if (judge.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("none of the ", out.judge_facts,
                     " newest facts can be ranked on the graph before them "
                     "(each names an entity it lacks): nothing to judge with"));
  }
  const RelationMap relations =
      open ? RelationMap() : MapRelationsByName(older.relations.names(), champion->relations());
  PathEvaluationOptions eval;
  eval.sampled = false;
  eval.full_ranking = true;
  eval.scoring.threads = options.eval_threads;
  const auto judge_start = std::chrono::steady_clock::now();
  for (auto [model, result] :
       {std::pair{champion.get(), &out.champion}, std::pair{out.model.get(), &out.challenger}}) {
    if (model == out.model.get() && !out.finite) continue;  // it would rank arbitrarily
    absl::StatusOr<EvaluationResult> evaluated =
        EvaluatePath(*model, graph, relations, judge, eval);
    if (!evaluated.ok()) return evaluated.status();
    *result = *std::move(evaluated);
  }
  out.judge_seconds = SecondsSince(judge_start);
  return out;
}

}  // namespace grail
