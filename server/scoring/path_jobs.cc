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

// Scores a list of facts given by id (ScoreTriplet(s)): the facts that share a head and a
// relation share one query, whose single pass scores all their tails.
class PathFactJob final : public PathJob {
 public:
  PathFactJob(FactJobSetup setup, LinkPredictor::ScoreCallback done)
      : PathJob(setup.model->path_runner()),
        model_(std::move(setup.model)),
        graph_(std::move(setup.graph)),
        relations_(std::move(setup.relations)),
        facts_(std::move(setup.facts)),
        budget_(setup.budget),
        results_(facts_.size()),
        done_(std::move(done)) {
    absl::flat_hash_map<std::pair<EntityId, int32_t>, size_t> query_of;
    for (size_t i = 0; i < facts_.size(); ++i) {
      const auto key = std::make_pair(facts_[i].head, facts_[i].model_relation);
      auto [it, added] = query_of.emplace(key, queries_.size());
      if (added) queries_.push_back({key.first, key.second, {}});
      queries_[it->second].facts.push_back(i);
    }
  }

  size_t size() const override { return queries_.size(); }
  absl::Status ExtractQuery(size_t i, PathBatchBuilder& builder, int64_t max_nodes,
                            PathBatch* out) override {
    // Only the facts' tails are read: the neighbourhood is what their scores depend on.
    std::vector<EntityId> tails;
    for (size_t f : queries_[i].facts) tails.push_back(facts_[f].tail);
    return builder.Add(Spec(model(), graph_.get(), relations_.get(), max_nodes, budget_, budget_),
                       {queries_[i].head, queries_[i].relation, {}, std::nullopt, std::move(tails)},
                       out);
  }
  void AcceptQuery(size_t i, const PathBatch& batch, int64_t q, const PathScores& scores) override {
    const int32_t nodes = static_cast<int32_t>(batch.node_begin[q + 1] - batch.node_begin[q]);
    const int32_t edges = static_cast<int32_t>(batch.edge_begin[q + 1] - batch.edge_begin[q]);
    for (size_t f : queries_[i].facts) {
      const FactToScore& fact = facts_[f];
      const bool known = fact.graph_relation != kNoGraphRelation &&
                         graph_->HasFact(fact.head, fact.graph_relation, fact.tail);
      results_[f] = FactScore{scores.Of(batch, q, fact.tail), nodes, edges, known,
                              batch.query_pruned[q] != 0};
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
           queries_.capacity() * (sizeof(Query) + sizeof(size_t));
  }
  std::string Describe(size_t i) const override {
    const Query& q = queries_[i];
    // An ULTRA model's relation ids are the graph's.
    const std::string& relation = model_->open_vocabulary() ? graph_->RelationName(q.relation)
                                                            : model_->relations()[q.relation];
    return absl::StrCat("(\"", graph_->EntityName(q.head), "\", \"", relation, "\", ?)");
  }

 private:
  struct Query {
    EntityId head = 0;
    int32_t relation = 0;       // the model's
    std::vector<size_t> facts;  // indices into facts_
  };

  const std::shared_ptr<const ServedModel> model_;
  const std::shared_ptr<const GraphSnapshot> graph_;
  const std::shared_ptr<const RelationMap> relations_;
  const std::vector<FactToScore> facts_;
  const PathBudget budget_;
  std::vector<FactScore> results_;
  std::vector<Query> queries_;
  LinkPredictor::ScoreCallback done_;
};

// Ranks candidates for (fixed, r, ?) or (?, r, fixed) with one query, (fixed, r, ?) or its
// inverse (fixed, r^-1, ?), whose pass scores every candidate; entities beyond its
// neighbourhood share its far score.
class PathRankingJob final : public PathJob {
 public:
  PathRankingJob(RankingSetup setup, LinkPredictor::RankCallback done)
      : PathJob(setup.model->path_runner()), r_(std::move(setup)), done_(std::move(done)) {}

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

  absl::Status ExtractQuery(size_t, PathBatchBuilder& builder, int64_t max_nodes,
                            PathBatch* out) override {
    const RankingSetup& s = r_.setup();
    const PathNeighbourhoodSpec spec =
        Spec(model(), s.graph.get(), s.relations.get(), max_nodes, s.budget, s.cap);
    const int32_t relation = s.model_relation + (s.rank_tails ? 0 : spec.num_relations);
    return builder.Add(spec, {s.fixed, relation, {}, std::nullopt}, out);
  }

  void AcceptQuery(size_t, const PathBatch& batch, int64_t q, const PathScores& scores) override {
    const GraphSnapshot& graph = r_.graph();
    const RankingSetup& s = r_.setup();
    if (r_.explicit_candidates()) {
      // A pruned pass gives a candidate it did not visit (outside its neighbourhood, or in it
      // but never reached) the far score: flagged, and counted as pruned, not as exact.
      const bool pruned = batch.query_pruned[q] != 0;
      for (EntityId c : r_.near()) {
        const int64_t node = batch.NodeOf(q, c);
        const bool unvisited = pruned && (node < 0 || scores.Unvisited(node));
        if (unvisited) r_.count_pruned();
        r_.Add({scores.Of(batch, q, c), c, r_.Known(c), ScoredBy::kPath, unvisited});
      }
      return;
    }
    // Every entity of the neighbourhood is near and scored on its own; every other live
    // entity is far (no path of the model's length reaches it: not a known answer either).
    std::vector<EntityId>& not_far = r_.not_far();
    // Skipped: the fixed entity, removed ones (a whole-graph pass lists them), and entities
    // the learned priority's pass did not reach (far, as those beyond are).
    for (int64_t node = batch.node_begin[q]; node < batch.node_begin[q + 1]; ++node) {
      const EntityId c = static_cast<EntityId>(batch.node_entity[node]);
      if (c == s.fixed || graph.IsRemoved(c) || scores.Unvisited(node)) continue;
      not_far.push_back(c);
      const bool is_known = r_.Known(c);
      if (s.filter_known_facts && is_known) {
        r_.count_filtered();
        continue;
      }
      r_.near().push_back(c);
      r_.Add({scores.node[node], c, is_known, ScoredBy::kPath});
    }
    const bool pruned = batch.query_pruned[q] != 0;
    if (pruned && s.graph_relation != kNoGraphRelation) {
      // A pruned pass may leave known answers unvisited (a hub's, beyond the budget): they
      // have the far score, and are filtered or marked known as the visited ones are.
      const absl::Span<const Neighbor> facts =
          s.rank_tails ? graph.OutEdges(s.fixed) : graph.InEdges(s.fixed);
      const size_t visited = not_far.size();
      for (const Neighbor& n : facts) {
        const EntityId c = n.entity;
        const int64_t node = batch.NodeOf(q, c);
        if (n.relation != s.graph_relation || c == s.fixed || graph.IsRemoved(c) ||
            (node >= 0 && !scores.Unvisited(node))) {
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
        r_.Add({scores.far[q], not_far[i], true, ScoredBy::kPath, /*pruned=*/true});
      }
    }
    std::sort(not_far.begin(), not_far.end());
    r_.set_far_count(graph.num_live_entities() - 1 - not_far.size());
    r_.set_shared_score(scores.far[q]);
    if (pruned) r_.set_pruned();
  }

  void Finish(absl::Status status) override {
    if (!status.ok()) return done_(std::move(status));
    done_(r_.Result(r_.shared_score(), ScoredBy::kPath));
  }

  size_t MemoryBytes() const override { return sizeof(*this) + r_.MemoryBytes(); }

  // One query: no candidate of its own.
  std::string Describe(size_t) const override { return r_.DescribeQuery(); }

 private:
  RankingState r_;
  LinkPredictor::RankCallback done_;
};

}  // namespace

std::shared_ptr<ScoringJob> MakePathFactJob(FactJobSetup setup, LinkPredictor::ScoreCallback done) {
  return std::make_shared<PathFactJob>(std::move(setup), std::move(done));
}

std::shared_ptr<ScoringJob> MakePathRankingJob(RankingSetup setup,
                                               LinkPredictor::RankCallback done) {
  return std::make_shared<PathRankingJob>(std::move(setup), std::move(done));
}

}  // namespace grail
