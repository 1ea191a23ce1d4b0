// The service's domain logic, free of gRPC: scoring and ranking facts given by name on the
// latest version of the live graph, with the served model.
//
// Names are resolved on one snapshot of the store, and everything a call computes reads
// that snapshot, so a call is consistent even while AddTriples commits chunks; a call that
// starts after a chunk was acknowledged sees it. Relations are matched to the model's
// vocabulary by name (the store numbers relations in order of first appearance).
//
// Each call uses the model served when it starts until it finishes, also across a model
// reload (SetModel).
//
// Calls are asynchronous: each hands its work to the InferenceEngine and returns; `done` is
// called exactly once with the outcome, either before the call returns (errors found at
// once) or later from an engine thread. No thread waits meanwhile.
//
// Ranking every entity is exact and costs what the graph near the fixed entity costs, not
// what the whole graph does: a candidate at undirected distance k + 2 or more from the fixed
// entity has the trivial enclosing subgraph (the two targets and the target edge, see
// TrivialSubgraphDistance), so all such candidates share one score, computed once per call
// on one of them; the fixed entity's own k-hop search is done once per call and reused for
// every candidate; the candidates near it are scored on their own subgraphs, and only the
// best top_k are kept. A fusion archive (model/fusion/fusion_model.h) scores as GraIL does, then
// combines each fact's GraIL score with its KGE models' scores where they all know the fact;
// ranking every entity, a far candidate with embeddings gets the shared GraIL score plus its own
// KGE scores (one KGE pass over every entity they know, on an extraction thread), and only those
// without embeddings share one score. A GraIL model with node features (early fusion) sees
// each candidate's own features even in a trivial subgraph, so each far candidate with
// features is scored on its own (a two-node subgraph) and only those without share a score.
// With a path model (model/path/path_model.h) a ranking is one query
// whose single pass scores every entity of the fixed entity's neighbourhood, every other entity
// sharing the query's far score; RankHeads is the inverse query; facts scored together that
// share (head, relation) share the query, and a query's pass is kept (pass_cache.h): asked
// again on the same graph, by any call, it costs a lookup. An ensemble archive
// (model/ensemble/ensemble_model.h) runs each member's path-family job in turn on the call's
// snapshot and gives each fact or candidate its rule over the members' scores.
//
// Thread safety: every method may be called from any number of threads.
#ifndef GRAIL_SERVER_SCORING_LINK_PREDICTOR_H_
#define GRAIL_SERVER_SCORING_LINK_PREDICTOR_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "graph/triple_file.h"
#include "model/path/path_batch.h"
#include "server/engine/inference_engine.h"
#include "server/scoring/fact_score.h"
#include "server/scoring/pass_cache.h"
#include "server/scoring/served_model.h"
#include "store/triple_store.h"

namespace grail {

struct SubmittedJob;  // scoring_jobs.h

// A path explaining a score (model/grail/explanation.h), with names instead of ids.
struct NamedPathStep {
  std::string from, to, relation;
  bool inverse = false;
  std::vector<float> attention;  // per layer
};
struct NamedPath {
  std::string rule;  // "r1(h,z1) ∧ r2^-1(z1,t)"
  double weight = 0;
  std::vector<double> layer_weights;
  std::vector<NamedPathStep> steps;
};

// Which scorer produced a score (the proto's ScoredBy): GraIL's network (with a fusion archive:
// through its GraIL-only classifier, for a fact some KGE model has no embedding for), the
// path-based scorer, a fusion archive's classifier over GraIL's and the KGE models' scores, or
// an ensemble archive's rule over its members' scores.
enum class ScoredBy { kGrail, kPath, kFusion, kEnsemble };

// Every scorer, in the enum's order; a family added adds one here and in the API's
// kg.v1.ScoredBy, and nothing in rpc/ or metrics/, which go through these.
inline constexpr ScoredBy kScorers[] = {ScoredBy::kGrail, ScoredBy::kPath, ScoredBy::kFusion,
                                        ScoredBy::kEnsemble};
inline constexpr size_t kScorerCount = sizeof(kScorers) / sizeof(kScorers[0]);

// A scorer's name: the label of its scores in grail_scores_total{scored_by} and, upper-cased
// after "SCORED_BY_", its value in the API's kg.v1.ScoredBy. The fusion family's is "fused",
// as the API and the dashboards have always named it.
inline absl::string_view ScorerName(ScoredBy scored_by) {
  static constexpr absl::string_view kNames[kScorerCount] = {"grail", "path", "fused", "ensemble"};
  return kNames[static_cast<size_t>(scored_by)];
}

struct ScoredFacts {
  std::vector<FactScore> scores;    // one per input fact, in order
  std::vector<ScoredBy> scored_by;  // one per input fact, in order
  uint64_t graph_sequence = 0;
  std::string model_version;  // the model that scored them (ServedModel::version)
  // With explain_paths > 0: the strongest paths of each fact, in order.
  std::vector<std::vector<NamedPath>> paths;
};

struct RankQuery {
  bool rank_tails = true;  // true: (fixed, relation, ?); false: (?, relation, fixed)
  std::string fixed;       // the head for tails, the tail for heads
  std::string relation;
  std::vector<std::string> candidates;  // empty: every entity but `fixed`
  uint32_t top_k = 0;                   // 0: all
  bool filter_known_facts = false;
  // Non-empty: an entity whose rank among every candidate the ranking also gives
  // (Ranking::answer_rank), as the benchmarks rank an answer: ties at the mean rank.
  std::string answer;
  // The call's own budget for pruned propagation (model/path/path_batch.h, PathBudget), each
  // part at most the server's (0: the server's); a path-family ranking whose neighbourhood
  // passes it is pruned to it.
  PathBudget budget;
};

struct RankedEntity {
  std::string entity;
  float score = 0;
  uint32_t rank = 0;  // 1-based; ties share the better rank
  bool known_fact = false;
  ScoredBy scored_by = ScoredBy::kGrail;
  bool pruned = false;  // kg.v1.RankedEntity.pruned
};

struct Ranking {
  std::vector<RankedEntity> ranked;  // best first, at most top_k
  uint32_t candidates_scored = 0;    // candidates ranked (shared score included)
  uint32_t candidates_filtered = 0;
  // Candidates that got the score of the trivial enclosing subgraph, computed once.
  uint32_t candidates_shared_score = 0;
  // Candidates (of candidates_shared_score) that a pruned propagation did not visit; 0 when
  // the ranking is exact.
  uint32_t candidates_pruned = 0;
  uint64_t graph_sequence = 0;
  std::string model_version;  // the model that scored them (ServedModel::version)
  // With RankQuery::answer: its rank among every candidate, 1 + the candidates scored above it
  // + half those scored the same (eval/ranking_metrics.h's rule), whatever top_k kept; 0 when
  // it is not a candidate (the fixed entity, left out of an explicit list, or filtered).
  double answer_rank = 0;
};

struct RankLimits {
  // Candidates one ranking may score on their own enclosing subgraphs (an explicit list,
  // or, over every entity, those within k + 1 hops of the fixed entity).
  uint32_t max_rank_subgraphs = 100000;
  // Entries one ranking over every entity may return when top_k is 0.
  uint32_t max_rank_results = 1000000;
  // The server's budget for pruned propagation (PathBudget: --max-subgraph-nodes and -edges
  // with --pruning; none, nodes == 0, without: a neighbourhood past them is refused).
  PathBudget budget;
  // A ScoreTriplet(s) pass's, within `budget` (--score-max-subgraph-nodes and -edges); each
  // count 0: budget's.
  PathBudget score_budget;

  PathBudget ScoreBudget() const {
    if (!budget.enabled()) return budget;
    return {score_budget.nodes > 0 ? std::min(score_budget.nodes, budget.nodes) : budget.nodes,
            score_budget.edges > 0 ? std::min(score_budget.edges, budget.edges) : budget.edges};
  }
};

class LinkPredictor {
 public:
  using ScoreCallback = std::function<void(absl::StatusOr<ScoredFacts>)>;
  using RankCallback = std::function<void(absl::StatusOr<Ranking>)>;

  // Serves `model`; `store` and `engine` must outlive the predictor. A path-family model's
  // passes are kept in a cache of `pass_cache_bytes` (0: none; see pass_cache.h).
  LinkPredictor(std::shared_ptr<const ServedModel> model, TripleStore& store,
                InferenceEngine& engine, const RankLimits& limits = RankLimits(),
                int64_t pass_cache_bytes = 0);

  // Scores each fact. Errors: NOT_FOUND naming an unknown entity; INVALID_ARGUMENT naming
  // a relation outside the model's vocabulary, or for head == tail; RESOURCE_EXHAUSTED
  // from admission or for a subgraph too large for one forward; DEADLINE_EXCEEDED or
  // CANCELLED as `control` says.
  // With explain_paths > 0, each fact also gets its explain_paths strongest paths
  // (computed on the extraction threads, on the subgraph the score comes from).
  // A path-family model answers a fact from a cached pass of its query where `staleness`
  // accepts one (exact by default: computed at the call's graph sequence), each score saying
  // the sequence it was computed at (FactScore::graph_sequence).
  void Score(std::vector<NamedTriple> facts, std::shared_ptr<CallControl> control,
             ScoreCallback done, int explain_paths = 0, Staleness staleness = {}) const;

  // Ranks candidates for the query's open slot by score, best first, equal scores in id
  // order. Every score equals what Score() returns for the completed fact (up to the last
  // bits of a float: see the proto). Candidates are deduplicated and the fixed entity
  // itself is left out. Errors as Score(), and RESOURCE_EXHAUSTED beyond the RankLimits,
  // saying how to narrow the call; INVALID_ARGUMENT for a call budget above the server's,
  // FAILED_PRECONDITION for one on a server that does not prune.
  void Rank(RankQuery query, std::shared_ptr<CallControl> control, RankCallback done) const;

  // Adds a chunk to the store (see TripleStore::AddChunk); visible to every call that
  // starts after it returns.
  absl::StatusOr<ChunkResult> Add(absl::Span<const NamedTriple> facts) {
    return store_.AddChunk(facts);
  }
  // Removes a chunk of facts, entities and relations from the store (see
  // TripleStore::RemoveChunk); likewise visible.
  absl::StatusOr<ChunkResult> Remove(absl::Span<const NamedTriple> facts,
                                     absl::Span<const std::string> entities = {},
                                     absl::Span<const std::string> relations = {}) {
    return store_.RemoveChunk(facts, entities, relations);
  }

  // The model calls starting now use.
  std::shared_ptr<const ServedModel> served_model() const;
  // Swaps the served model: calls that already started finish on the one they hold, every
  // later call uses `model`. O(1); never waits for a call.
  void SetModel(std::shared_ptr<const ServedModel> model);

  TripleStore& store() const { return store_; }
  InferenceEngine& engine() const { return engine_; }
  const RankLimits& limits() const { return limits_; }
  // The path family's passes (its Stats() for metrics).
  const PassCache& passes() const { return *passes_; }

 private:
  // The served model, the latest snapshot and the map from its relation ids to the model's.
  struct View {
    std::shared_ptr<const ServedModel> model;
    std::shared_ptr<const GraphSnapshot> snapshot;
    std::shared_ptr<const RelationMap> relations;
  };
  View CurrentView() const;
  // Submits a later job of the call `control` is for (JobSubmitter, scoring_jobs.h).
  std::function<void(struct SubmittedJob)> Submitter(
      const std::shared_ptr<CallControl>& control) const;
  // The budget of a call that asked for `asked` (RankQuery::budget), or the error refusing it.
  absl::StatusOr<PathBudget> CallBudget(const PathBudget& asked) const;

  TripleStore& store_;
  InferenceEngine& engine_;
  const RankLimits limits_;
  const std::unique_ptr<PassCache> passes_;
  mutable std::mutex model_mu_;
  std::shared_ptr<const ServedModel> model_;  // guarded by model_mu_
};

}  // namespace grail

#endif  // GRAIL_SERVER_SCORING_LINK_PREDICTOR_H_
