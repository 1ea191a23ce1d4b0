// The path family's jobs (scoring_jobs.h): a query's one pass scores every entity of the
// query entity's neighbourhood, every other entity sharing the query's far score.
#include <algorithm>
#include <optional>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "server/scoring/path_work.h"
#include "server/scoring/ranking.h"
#include "server/scoring/scoring_jobs.h"

namespace grail {
namespace {

// The query's neighbourhood spec, pruned to the call's `budget` within the server's `cap` as
// the model prunes (PathModel::Pruning).
PathNeighbourhoodSpec Spec(const PathModel& model, const GraphView* graph,
                           const RelationMap* relations, int64_t max_nodes,
                           const PathBudget& budget, const PathBudget& cap) {
  PathNeighbourhoodSpec spec = model.Neighbourhood(graph, relations, max_nodes);
  spec.prune = model.Pruning(budget, cap);
  return spec;
}

// The key of query (source, relation) of `runner`'s model pruned to `budget` (PassKey), for
// `targets` (sorted).
PassKey KeyOf(const PathModel& model, const PathRunner& runner, EntityId source, int32_t relation,
              const PathBudget& budget, const PathBudget& cap, std::vector<EntityId> targets) {
  const PathBudget pruning = model.Pruning(budget, cap);
  return PassKey{runner.instance(), source,        relation,
                 pruning.nodes,     pruning.edges, pruning.layer_nodes,
                 std::move(targets)};
}

// The path family as the server serves it (scoring_jobs.h), ULTRA's included.
class PathServing final : public ServedFamily {
 public:
  explicit PathServing(std::shared_ptr<const PathModel> model)
      : model_(std::move(model)), runner_(*model_) {}

  const PathRunner& runner() const { return runner_; }

  const std::vector<std::string>& relations() const override { return model_->relations(); }
  bool open_vocabulary() const override { return model_->open_vocabulary(); }
  ModelSummary Summary() const override;
  absl::Status CheckExplanations(int explain_paths) const override {
    if (explain_paths == 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        "explanations are the paths of GraIL's enclosing subgraphs; the served model is a "
        "path-family model, which has none");
  }
  SubmittedJob FactJob(FactJobSetup setup, int explain_paths,
                       LinkPredictor::ScoreCallback done) const override;
  SubmittedJob RankingJob(RankingSetup setup, LinkPredictor::RankCallback done) const override;
  absl::StatusOr<int> WarmUp(const ServedModel& served, const WarmupInput& input,
                             const WarmupOptions& options) const override;
  // A model without the reach mask (ULTRA's included) reads a scored fact's whole L-hop ball,
  // on a connected graph nearly a pass over the graph: a few facts exercise the serving path
  // as well as a batch of them (256 took 30 s on WordNet's 112k entities).
  size_t ServingWarmUpFacts(size_t asked) const override {
    return model_->config().radius() < 0 ? std::min<size_t>(asked, 4) : asked;
  }

 private:
  const std::shared_ptr<const PathModel> model_;
  const PathRunner runner_;
};

// Scores a list of facts given by id (ScoreTriplet(s)): the facts that share a head and a
// relation share one query, whose single pass scores all their tails.
class PathFactJob final : public PathJob {
 public:
  PathFactJob(const PathServing& family, FactJobSetup setup, LinkPredictor::ScoreCallback done)
      : PathJob(family.runner(),
                PassLookup{setup.passes, setup.graph->sequence(), setup.staleness}),
        model_(std::move(setup.model)),
        graph_(std::move(setup.graph)),
        relations_(std::move(setup.relations)),
        facts_(std::move(setup.facts)),
        budget_(setup.budget),
        cap_(setup.cap),
        results_(facts_.size()),
        done_(std::move(done)) {
    absl::flat_hash_map<std::pair<EntityId, int32_t>, size_t> query_of;
    for (size_t i = 0; i < facts_.size(); ++i) {
      const auto key = std::make_pair(facts_[i].head, facts_[i].model_relation);
      auto [it, added] = query_of.emplace(key, queries_.size());
      if (added) queries_.push_back({key.first, key.second, {}, {}});
      queries_[it->second].facts.push_back(i);
    }
    // Each query's tails, sorted: the neighbourhood, and so the key, is that of the set.
    for (Query& q : queries_) {
      for (size_t f : q.facts) q.tails.push_back(facts_[f].tail);
      std::sort(q.tails.begin(), q.tails.end());
      q.tails.erase(std::unique(q.tails.begin(), q.tails.end()), q.tails.end());
    }
  }

  size_t size() const override { return queries_.size(); }
  PassKey KeyOf(size_t i) const override {
    return grail::KeyOf(model(), path_runner(), queries_[i].head, queries_[i].relation, budget_,
                        cap_, queries_[i].tails);
  }
  absl::Status ExtractQuery(size_t i, PathBatchBuilder& builder, int64_t max_nodes,
                            PathBatch* out) override {
    return builder.Add(SpecOf(max_nodes), QueryOf(i), out);
  }
  bool TargetsKeepWholeQuery(size_t i, PathBatchBuilder& builder, int64_t max_nodes) override {
    return builder.TargetsKeepWholeQuery(SpecOf(max_nodes), QueryOf(i));
  }
  void AcceptQuery(size_t i, const QueryPass& pass) override {
    for (size_t f : queries_[i].facts) {
      const FactToScore& fact = facts_[f];
      const bool known = fact.graph_relation != kNoGraphRelation &&
                         graph_->HasFact(fact.head, fact.graph_relation, fact.tail);
      results_[f] = FactScore{pass.Of(fact.tail), pass.nodes(),   pass.edges(), known,
                              pass.pruned(),      pass.sequence()};
    }
  }
  void Finish(absl::Status status) override {
    if (!status.ok()) return done_(std::move(status));
    std::vector<ScoredBy> scored_by(results_.size(), ScoredBy::kPath);
    done_(ScoredFacts{
        std::move(results_), std::move(scored_by), graph_->sequence(), model_->version(), {}});
  }
  size_t MemoryBytes() const override {
    return sizeof(*this) + facts_.capacity() * sizeof(FactToScore) +
           results_.capacity() * sizeof(FactScore) +
           queries_.capacity() * (sizeof(Query) + sizeof(size_t) + sizeof(EntityId));
  }
  std::string Describe(size_t i) const override {
    const Query& q = queries_[i];
    // An ULTRA model's relation ids are the graph's.
    const std::string& relation = model_->open_vocabulary() ? graph_->RelationName(q.relation)
                                                            : model_->relations()[q.relation];
    return absl::StrCat("(\"", graph_->EntityName(q.head), "\", \"", relation, "\", ?)");
  }

 private:
  PathNeighbourhoodSpec SpecOf(int64_t max_nodes) const {
    return Spec(model(), graph_.get(), relations_.get(), max_nodes, budget_, cap_);
  }
  // Query i with its facts' tails as targets: the neighbourhood is what their scores depend
  // on.
  PathQuery QueryOf(size_t i) const {
    return {queries_[i].head, queries_[i].relation, {}, std::nullopt, queries_[i].tails};
  }

  struct Query {
    EntityId head = 0;
    int32_t relation = 0;         // the model's
    std::vector<size_t> facts;    // indices into facts_
    std::vector<EntityId> tails;  // their tails, sorted, once each
  };

  const std::shared_ptr<const ServedModel> model_;
  const std::shared_ptr<const GraphSnapshot> graph_;
  const std::shared_ptr<const RelationMap> relations_;
  const std::vector<FactToScore> facts_;
  const PathBudget budget_;  // the scores'
  const PathBudget cap_;     // the server's
  std::vector<FactScore> results_;
  std::vector<Query> queries_;
  LinkPredictor::ScoreCallback done_;
};

// Ranks candidates for (fixed, r, ?) or (?, r, fixed) with one query, (fixed, r, ?) or its
// inverse (fixed, r^-1, ?), whose pass scores every candidate; entities beyond its
// neighbourhood share its far score.
class PathRankingJob final : public PathJob {
 public:
  PathRankingJob(const PathServing& family, RankingSetup setup, LinkPredictor::RankCallback done)
      : PathJob(family.runner(), PassLookup{setup.passes, setup.graph->sequence(), {}}),
        r_(std::move(setup)),
        done_(std::move(done)) {}

  absl::Status Prepare() override {
    if (!r_.explicit_candidates()) {
      // The pass decides which candidates are near (AcceptQuery); the count is known now.
      return r_.CheckResultCount(r_.graph().num_live_entities() - 1);
    }
    absl::Status status = r_.ResolveExplicitCandidates();
    if (!status.ok()) return status;
    r_.FilterKnownFacts();
    return r_.CheckResultCount(r_.near().size() + r_.far_count());
  }

  size_t size() const override { return 1; }

  PassKey KeyOf(size_t) const override {
    const RankingSetup& s = r_.setup();
    return grail::KeyOf(model(), path_runner(), s.fixed, QueryRelation(), s.budget, s.cap, {});
  }

  bool TargetsKeepWholeQuery(size_t, PathBatchBuilder&, int64_t) override { return true; }

  absl::Status ExtractQuery(size_t, PathBatchBuilder& builder, int64_t max_nodes,
                            PathBatch* out) override {
    const RankingSetup& s = r_.setup();
    const PathNeighbourhoodSpec spec =
        Spec(model(), s.graph.get(), s.relations.get(), max_nodes, s.budget, s.cap);
    return builder.Add(spec, {s.fixed, QueryRelation(), {}, std::nullopt}, out);
  }

  void AcceptQuery(size_t, const QueryPass& pass) override {
    const GraphSnapshot& graph = r_.graph();
    const RankingSetup& s = r_.setup();
    const bool pruned = pass.pruned();
    if (r_.explicit_candidates()) {
      // A pruned pass gives a candidate it did not visit (outside its neighbourhood, or in it
      // but never reached) the far score: flagged, and counted as pruned, not as exact.
      for (EntityId c : r_.near()) {
        const int64_t node = pass.Find(c);
        const bool unvisited = pruned && (node < 0 || pass.unvisited(node));
        if (unvisited) r_.count_pruned();
        r_.Add({pass.Of(c), c, r_.Known(c), ScoredBy::kPath, unvisited});
      }
      return;
    }
    // Every entity of the neighbourhood is near and scored on its own; every other live
    // entity is far (no path of the model's length reaches it: not a known answer either).
    std::vector<EntityId>& not_far = r_.not_far();
    // Skipped: the fixed entity, removed ones (a whole-graph pass lists them), and entities
    // the learned priority's pass did not reach (far, as those beyond are).
    for (size_t node = 0; node < pass.size(); ++node) {
      const EntityId c = pass.entity(node);
      if (c == s.fixed || graph.IsRemoved(c) || pass.unvisited(node)) continue;
      not_far.push_back(c);
      const bool is_known = r_.Known(c);
      if (s.filter_known_facts && is_known) {
        r_.count_filtered();
        continue;
      }
      r_.near().push_back(c);
      r_.Add({pass.score(node), c, is_known, ScoredBy::kPath});
    }
    if (pruned && s.graph_relation != kNoGraphRelation) {
      // A pruned pass may leave known answers unvisited (a hub's, beyond the budget): they
      // have the far score, and are filtered or marked known as the visited ones are.
      const absl::Span<const Neighbor> facts =
          s.rank_tails ? graph.OutEdges(s.fixed) : graph.InEdges(s.fixed);
      const size_t visited = not_far.size();
      for (const Neighbor& n : facts) {
        const EntityId c = n.entity;
        const int64_t node = pass.Find(c);
        if (n.relation != s.graph_relation || c == s.fixed || graph.IsRemoved(c) ||
            (node >= 0 && !pass.unvisited(node))) {
          continue;
        }
        not_far.push_back(c);
      }
      std::sort(not_far.begin() + visited, not_far.end());
      not_far.erase(std::unique(not_far.begin() + visited, not_far.end()), not_far.end());
      for (size_t i = visited; i < not_far.size(); ++i) {
        if (s.filter_known_facts) {
          r_.count_filtered();
          continue;
        }
        r_.near().push_back(not_far[i]);
        r_.count_pruned();
        r_.Add({pass.far(), not_far[i], true, ScoredBy::kPath, /*pruned=*/true});
      }
    }
    std::sort(not_far.begin(), not_far.end());
    r_.set_far_count(graph.num_live_entities() - 1 - not_far.size());
    r_.set_shared_score(pass.far());
    if (pruned) r_.set_pruned();
  }

  void Finish(absl::Status status) override {
    const CandidateScoresCallback& member = r_.setup().member_scores;
    if (member) {
      if (!status.ok()) return member(std::move(status));
      return member(r_.MemberScores());
    }
    if (!status.ok()) return done_(std::move(status));
    done_(r_.Result(r_.shared_score(), ScoredBy::kPath));
  }

  size_t MemoryBytes() const override { return sizeof(*this) + r_.MemoryBytes(); }

  // One query: no candidate of its own.
  std::string Describe(size_t) const override { return r_.DescribeQuery(); }

 private:
  // (fixed, r, ?), or its inverse (fixed, r^-1, ?) for heads.
  int32_t QueryRelation() const {
    const RankingSetup& s = r_.setup();
    return s.model_relation + (s.rank_tails ? 0 : model().NumRelations(*s.graph));
  }

  RankingState r_;
  LinkPredictor::RankCallback done_;
};

ModelSummary PathServing::Summary() const {
  ModelSummary summary;
  summary.format = model_->format();
  summary.hops = std::max(0, model_->config().radius());  // 0: the whole graph
  summary.layers = model_->config().num_layers;
  summary.dim = model_->config().dim;
  summary.parameters = model_->num_parameters();
  summary.training_fingerprint = model_->training_fingerprint();
  summary.device = model_->device();
  return summary;
}

SubmittedJob PathServing::FactJob(FactJobSetup setup, int explain_paths,
                                  LinkPredictor::ScoreCallback done) const {
  auto job = std::make_shared<PathFactJob>(*this, std::move(setup), std::move(done));
  const size_t queries = job->size();
  return {std::move(job), queries};
}

SubmittedJob PathServing::RankingJob(RankingSetup setup, LinkPredictor::RankCallback done) const {
  // One query, whatever the candidates.
  return {std::make_shared<PathRankingJob>(*this, std::move(setup), std::move(done)), 1};
}

// Each forward runs the queries (head, relation, ?) of facts, up to the batch limits (a
// neighbourhood that alone exceeds them runs alone).
absl::StatusOr<int> PathServing::WarmUp(const ServedModel& served, const WarmupInput& input,
                                        const WarmupOptions& options) const {
  const PathModel& model = *model_;
  const std::vector<WarmupFact>& facts = input.facts;
  const PathNeighbourhoodSpec spec =
      Spec(model, input.graph, input.relations, options.max_subgraph_nodes, options.path_budget,
           options.path_cap);
  PathBatchBuilder builder;
  PathBatch batch, one;
  size_t next = 0;
  int forwards = 0;
  for (int b = 0; b < options.batches; ++b) {
    if (options.stop && options.stop()) return StoppedWarmUp();
    batch.Clear();
    const int64_t size = b % 2 == 1 ? 1 : std::max(1, options.batch_size);
    for (size_t tried = 0; tried < 4 * facts.size() && batch.num_queries() < size; ++tried) {
      const WarmupFact& f = facts[next++ % facts.size()];
      one.Clear();
      absl::Status built = builder.Add(spec, {f.fact.head, f.model_relation, {}, {}}, &one);
      if (absl::IsResourceExhausted(built)) continue;  // past the limit: served, it is refused
      if (!built.ok()) return built;
      if (batch.num_queries() > 0 &&
          (batch.num_nodes() + one.num_nodes() > options.max_batch_nodes ||
           batch.num_edges() + one.num_edges() > options.max_batch_edges)) {
        break;
      }
      batch.Append(one);
    }
    if (batch.num_queries() == 0) continue;
    absl::StatusOr<PathScores> scores = model.Score(batch);
    if (!scores.ok()) {
      return absl::Status(scores.status().code(), absl::StrCat("warming up model ", served.path(),
                                                               ": ", scores.status().message()));
    }
    ++forwards;
  }
  return forwards;
}

}  // namespace

std::unique_ptr<const ServedFamily> ServePath(std::shared_ptr<const PathModel> model) {
  return std::make_unique<PathServing>(std::move(model));
}

}  // namespace grail
