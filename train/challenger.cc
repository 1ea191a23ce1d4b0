#include "train/challenger.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/elapsed.h"
#include "eval/path_evaluation.h"
#include "graph/relation_map.h"
#include "graph/static_graph.h"
#include "model/families.h"

namespace grail {
namespace {

Json RankingJson(const EvaluationResult& result) {
  Json out = Json::object();
  if (!result.full) return out;
  out["mrr"] = result.full->mrr;
  out["hits_at_1"] = result.full->hits_at_1;
  out["hits_at_10"] = result.full->hits_at_10;
  return out;
}

}  // namespace

AgeSplit SplitByAge(absl::Span<const NamedTriple> facts, size_t judge, size_t valid,
                    double max_window_share) {
  const size_t n = facts.size();
  // first[e]: the first fact naming entity e; latest[i]: the later of its two entities' first
  // facts. Fact i is rankable on the graph of the facts before c iff latest[i] < c.
  absl::flat_hash_map<absl::string_view, uint32_t> first;
  std::vector<uint32_t> latest(n);
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t h = first.try_emplace(facts[i].head, i).first->second;
    const uint32_t t = first.try_emplace(facts[i].tail, i).first->second;
    // A fact linking an entity to itself is never ranked: it can never be rankable.
    latest[i] = facts[i].head == facts[i].tail ? i : std::max(h, t);
  }
  std::vector<std::vector<uint32_t>> by_latest(n);
  for (uint32_t i = 0; i < n; ++i) by_latest[latest[i]].push_back(i);
  const size_t window_floor = static_cast<size_t>(max_window_share * n);

  AgeSplit out;
  std::vector<uint8_t> role(n, 0);  // 0 train, 1 valid, 2 judge
  // The window [c, end) for `want` rankable facts: the newest one that holds them, or the
  // longest allowed.
  auto window = [&](size_t end, size_t want, uint8_t as) {
    if (want == 0 || end == 0) return end;
    const size_t floor = end > window_floor ? end - window_floor : 0;
    size_t c = end, count = 0;
    while (c > floor && count < want) {
      // From c to c - 1: fact c - 1 joins; facts whose latest is c - 1 stop being rankable.
      --c;
      for (uint32_t i : by_latest[c]) {
        if (i > c && i < end) --count;
      }
      if (latest[c] < c) ++count;
    }
    size_t taken = 0;
    for (size_t i = end; i-- > c && taken < want;) {
      if (latest[i] < c) {
        role[i] = as;
        ++taken;
      }
    }
    for (size_t i = c; i < end; ++i) out.moved_to_train += role[i] == 0;
    return c;
  };
  const size_t judge_start = window(n, judge, 2);
  window(judge_start, valid, 1);
  for (uint32_t i = 0; i < n; ++i) {
    (role[i] == 2 ? out.judge : role[i] == 1 ? out.valid : out.train).push_back(i);
  }
  return out;
}

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
  if (champion.open_vocabulary()) {
    PathTrainOptions o = UltraFineTuneRecipe(std::move(base));
    o.epochs = 5;
    return o;
  }
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

double Challenge::gain_standard_error() const {
  if (!finite || !champion.full || !challenger.full) return 0;
  const std::vector<double>& a = challenger.full->reciprocal_ranks;
  const std::vector<double>& b = champion.full->reciprocal_ranks;
  const size_t m = std::min(a.size(), b.size());
  if (m < 2) return 0;
  double mean = 0;
  for (size_t j = 0; j < m; ++j) mean += (a[j] - b[j]) / static_cast<double>(m);
  double squares = 0;
  for (size_t j = 0; j < m; ++j) squares += (a[j] - b[j] - mean) * (a[j] - b[j] - mean);
  return std::sqrt(squares / static_cast<double>(m - 1) / static_cast<double>(m));
}

Json Challenge::ToJson() const {
  Json out = {{"train_facts", train_facts},
              {"valid_facts", valid_facts},
              {"judge_facts", judge_facts},
              {"judge_unrankable", judge_unrankable},
              {"moved_to_train", moved_to_train},
              {"unknown_relation", unknown_relation},
              {"champion", RankingJson(champion)},
              {"challenger", RankingJson(challenger)},
              {"challenger_finite", finite},
              {"gain", gain()},
              {"gain_standard_error", gain_standard_error()},
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
  return RunChallenge(facts, *loaded->path, options, on_epoch);
}

absl::StatusOr<Challenge> RunChallenge(absl::Span<const NamedTriple> facts,
                                       const PathModel& champion, const ChallengeOptions& options,
                                       const std::function<void(const EpochReport&)>& on_epoch) {
  const bool open = champion.open_vocabulary();

  // A closed vocabulary is the champion's, in its order (the trainer requires exactly it);
  // facts of other relations cannot be learnt or ranked by it.
  Challenge out;
  std::vector<NamedTriple> usable;
  usable.reserve(facts.size());
  const Vocabulary champion_relations(champion.relations());
  for (const NamedTriple& f : facts) {
    if (!open && !champion_relations.Find(f.relation)) {
      ++out.unknown_relation;
      continue;
    }
    usable.push_back(f);
  }
  const size_t cap = static_cast<size_t>(options.max_holdout_share * usable.size());
  const AgeSplit split = SplitByAge(usable, std::min(options.judge_facts, cap),
                                    std::min(options.valid_facts, cap), options.max_window_share);
  out.judge_facts = split.judge.size();
  out.valid_facts = split.valid.size();
  out.train_facts = split.train.size();
  out.moved_to_train = split.moved_to_train;
  if (out.train_facts < 10 || out.judge_facts == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "too few facts to fine-tune and judge: ", usable.size(), " usable (", out.unknown_relation,
        " of relations the served model lacks), ", out.judge_facts,
        " of the newest of them rankable on the graph before them; training needs 10"));
  }
  auto pick = [&](const std::vector<uint32_t>& indices) {
    std::vector<NamedTriple> picked;
    picked.reserve(indices.size());
    for (uint32_t i : indices) picked.push_back(usable[i]);
    return picked;
  };
  const std::vector<NamedTriple> train_named = pick(split.train);
  const std::vector<NamedTriple> valid_named = pick(split.valid);
  const std::vector<NamedTriple> judge_named = pick(split.judge);
  std::vector<NamedTriple> older = train_named;
  older.insert(older.end(), valid_named.begin(), valid_named.end());

  // Train on the oldest facts, validate on the next ones.
  IndexedTriples train;
  if (!open) train.relations = champion_relations;
  IndexTriples(train_named, &train);
  const auto train_start = std::chrono::steady_clock::now();
  absl::StatusOr<std::unique_ptr<PathModel>> trained =
      TrainPath(train, valid_named, options.recipe, [&](const EpochReport& report) {
        out.epochs = report.epoch;
        if (on_epoch) on_epoch(report);
      });
  if (!trained.ok()) return trained.status();
  out.train_seconds = SecondsSince(train_start);
  out.model = *std::move(trained);
  out.finite = out.model->CheckFinite().ok();

  // Judge both on the newest facts, over the graph of everything older.
  IndexedTriples before;
  if (!open) before.relations = champion_relations;
  IndexTriples(older, &before);
  const StaticGraph graph(before.entities.size(), before.triples);
  std::vector<Triple> judge;
  for (const NamedTriple& f : judge_named) {
    const std::optional<EntityId> h = before.entities.Find(f.head);
    const std::optional<EntityId> t = before.entities.Find(f.tail);
    const std::optional<RelationId> r = before.relations.Find(f.relation);
    if (!h || !t || !r || *h == *t || graph.HasFact(*h, *r, *t)) {
      ++out.judge_unrankable;
      continue;
    }
    judge.push_back({*h, *r, *t});
  }
  if (judge.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("none of the ", out.judge_facts,
                     " judge facts can be ranked (each repeats a fact of the graph before it, or "
                     "links an entity to itself): nothing to judge with"));
  }
  const RelationMap relations =
      open ? RelationMap() : MapRelationsByName(before.relations.names(), champion.relations());
  PathEvaluationOptions eval;
  eval.sampled = false;
  eval.full_ranking = true;
  eval.scoring.threads = options.eval_threads;
  const auto judge_start = std::chrono::steady_clock::now();
  for (auto [model, result] :
       {std::pair<const PathModel*, EvaluationResult*>{&champion, &out.champion},
        std::pair<const PathModel*, EvaluationResult*>{out.model.get(), &out.challenger}}) {
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
