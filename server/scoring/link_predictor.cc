#include "server/scoring/link_predictor.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "graph/vocabulary.h"
#include "server/scoring/scoring_jobs.h"

namespace grail {

absl::StatusOr<EntityId> FindEntity(const GraphSnapshot& graph, const std::string& name) {
  std::optional<EntityId> id = graph.FindEntity(name);
  if (!id)
    return absl::NotFoundError(absl::StrCat("entity ", QuoteName(name), " is not in the graph"));
  return *id;
}

LinkPredictor::LinkPredictor(std::shared_ptr<const ServedModel> model, TripleStore& store,
                             InferenceEngine& engine, const RankLimits& limits,
                             int64_t pass_cache_bytes)
    : store_(store),
      engine_(engine),
      limits_(limits),
      passes_(std::make_unique<PassCache>(pass_cache_bytes)),
      model_(std::move(model)) {}

std::shared_ptr<const ServedModel> LinkPredictor::served_model() const {
  std::lock_guard<std::mutex> lock(model_mu_);
  return model_;
}

void LinkPredictor::SetModel(std::shared_ptr<const ServedModel> model) {
  std::lock_guard<std::mutex> lock(model_mu_);
  model_.swap(model);
  // The old model is released outside the lock (below), or by its last call.
}

std::function<void(SubmittedJob)> LinkPredictor::Submitter(
    const std::shared_ptr<CallControl>& control) const {
  return
      [this, control](SubmittedJob job) { engine_.Submit(std::move(job.job), control, job.size); };
}

LinkPredictor::View LinkPredictor::CurrentView() const {
  View view;
  view.model = served_model();
  view.snapshot = store_.Snapshot();
  view.relations = view.model->RelationsOf(*view.snapshot);
  return view;
}

void LinkPredictor::Score(std::vector<NamedTriple> facts, std::shared_ptr<CallControl> control,
                          ScoreCallback done, int explain_paths, Staleness staleness) const {
  const View view = CurrentView();
  std::vector<FactToScore> scoring(facts.size());
  for (size_t i = 0; i < facts.size(); ++i) {
    const NamedTriple& f = facts[i];
    absl::StatusOr<int32_t> model_relation = view.model->RelationId(f.relation, *view.snapshot);
    if (!model_relation.ok()) return done(model_relation.status());
    absl::StatusOr<EntityId> head = FindEntity(*view.snapshot, f.head);
    if (!head.ok()) return done(head.status());
    absl::StatusOr<EntityId> tail = FindEntity(*view.snapshot, f.tail);
    if (!tail.ok()) return done(tail.status());
    if (*head == *tail) {
      return done(absl::InvalidArgumentError(absl::StrCat(
          "head and tail are the same entity (\"", f.head, "\"); GraIL scores pairs of entities")));
    }
    const std::optional<RelationId> graph_relation = view.snapshot->FindRelation(f.relation);
    scoring[i] =
        FactToScore{*head, graph_relation.value_or(kNoGraphRelation), *tail, *model_relation};
  }
  FactJobSetup setup{
      view.model,     view.snapshot, view.relations, std::move(scoring), limits_.ScoreBudget(),
      limits_.budget, passes_.get(), staleness,      Submitter(control)};
  const ServedFamily& family = view.model->family();
  if (absl::Status explainable = family.CheckExplanations(explain_paths); !explainable.ok()) {
    return done(explainable);
  }
  SubmittedJob job = family.FactJob(std::move(setup), explain_paths, std::move(done));
  engine_.Submit(std::move(job.job), std::move(control), job.size);
}

absl::StatusOr<PathBudget> LinkPredictor::CallBudget(const PathBudget& asked) const {
  const PathBudget& server = limits_.budget;
  if (asked.nodes == 0 && asked.edges == 0) return server;
  if (asked.nodes < 0 || asked.edges < 0) {
    return absl::InvalidArgumentError("a propagation budget is a count of nodes and edges");
  }
  if (server.nodes == 0) {
    return absl::FailedPreconditionError(
        "this server does not prune propagation (--pruning=false); leave max_visited_nodes and "
        "max_visited_edges at 0");
  }
  if (asked.nodes > server.nodes || asked.edges > server.edges) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the call's budget (max_visited_nodes ", asked.nodes, ", max_visited_edges ", asked.edges,
        ") is above the server's (", server.nodes, " nodes, --max-subgraph-nodes; ", server.edges,
        " edges, --max-subgraph-edges)"));
  }
  return PathBudget{asked.nodes > 0 ? asked.nodes : server.nodes,
                    asked.edges > 0 ? asked.edges : server.edges};
}

void LinkPredictor::Rank(RankQuery query, std::shared_ptr<CallControl> control,
                         RankCallback done) const {
  absl::StatusOr<PathBudget> budget = CallBudget(query.budget);
  if (!budget.ok()) return done(budget.status());
  const View view = CurrentView();
  absl::StatusOr<int32_t> model_relation = view.model->RelationId(query.relation, *view.snapshot);
  if (!model_relation.ok()) return done(model_relation.status());
  absl::StatusOr<EntityId> fixed = FindEntity(*view.snapshot, query.fixed);
  if (!fixed.ok()) return done(fixed.status());
  std::optional<EntityId> answer;
  if (!query.answer.empty()) {
    absl::StatusOr<EntityId> found = FindEntity(*view.snapshot, query.answer);
    if (!found.ok()) return done(found.status());
    answer = *found;
  }

  RankingSetup setup;
  setup.model = view.model;
  setup.graph = view.snapshot;
  setup.relations = view.relations;
  setup.limits = limits_;
  setup.observer = &engine_.observer();
  setup.rank_tails = query.rank_tails;
  setup.fixed = *fixed;
  setup.relation_name = query.relation;
  setup.graph_relation = view.snapshot->FindRelation(query.relation).value_or(kNoGraphRelation);
  setup.model_relation = *model_relation;
  setup.candidates = std::move(query.candidates);
  setup.top_k = query.top_k;
  setup.filter_known_facts = query.filter_known_facts;
  setup.answer = answer;
  setup.budget = *budget;
  setup.cap = limits_.budget;
  setup.passes = passes_.get();
  setup.submit = Submitter(control);
  SubmittedJob job = view.model->family().RankingJob(std::move(setup), std::move(done));
  engine_.Submit(std::move(job.job), std::move(control), job.size);
}

}  // namespace grail
