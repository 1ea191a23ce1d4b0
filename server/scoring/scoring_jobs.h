// The jobs LinkPredictor hands the engine: for each family, one that scores a list of facts
// and one that ranks the candidates of (fixed, r, ?) or (?, r, fixed). Each family's jobs live
// in its own file (grail_jobs.cc, path_jobs.cc) and run on its runner (grail_work.h,
// path_work.h); what a ranking does whatever the family is in ranking.h.
#ifndef GRAIL_SERVER_SCORING_SCORING_JOBS_H_
#define GRAIL_SERVER_SCORING_SCORING_JOBS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "graph/ids.h"
#include "graph/relation_map.h"
#include "server/engine/inference_engine.h"
#include "server/scoring/link_predictor.h"
#include "server/scoring/pass_cache.h"
#include "server/scoring/served_model.h"
#include "store/live_graph.h"

namespace grail {

// The graph's id of a relation no fact uses yet (the model may still know it).
inline constexpr RelationId kNoGraphRelation = 0xffffffffu;

// A fact to score, by id.
struct FactToScore {
  EntityId head = 0;
  RelationId graph_relation = kNoGraphRelation;
  EntityId tail = 0;
  int32_t model_relation = 0;
};

// What a fact-scoring job works on: the call's model, snapshot and relation map.
struct FactJobSetup {
  std::shared_ptr<const ServedModel> model;
  std::shared_ptr<const GraphSnapshot> graph;
  std::shared_ptr<const RelationMap> relations;
  std::vector<FactToScore> facts;
  PathBudget budget;  // the scores' (RankLimits::ScoreBudget)
  PathBudget cap;     // the server's
  // The path family's pass cache (null: none), and how stale a pass the call accepts.
  PassCache* passes = nullptr;
  Staleness staleness;
};

// What a ranking job works on.
struct RankingSetup {
  std::shared_ptr<const ServedModel> model;
  std::shared_ptr<const GraphSnapshot> graph;
  std::shared_ptr<const RelationMap> relations;
  RankLimits limits;
  EngineObserver* observer = nullptr;
  bool rank_tails = true;
  EntityId fixed = 0;
  std::string relation_name;
  RelationId graph_relation = kNoGraphRelation;
  int32_t model_relation = 0;
  std::vector<std::string> candidates;  // empty: every entity
  uint32_t top_k = 0;
  bool filter_known_facts = false;
  PathBudget budget;            // the call's (the server's unless it asked for less)
  PathBudget cap;               // the server's
  PassCache* passes = nullptr;  // the path family's pass cache (null: none); exact passes only
};

// GraIL (and a fused archive, served as its GraIL model): each fact on its own enclosing
// subgraph; with explain_paths > 0, each fact's strongest paths too.
std::shared_ptr<ScoringJob> MakeGrailFactJob(FactJobSetup setup, int explain_paths,
                                             LinkPredictor::ScoreCallback done);
// The facts that share a head and a relation share one query, whose pass scores their tails;
// a query whose pass is cached (FactJobSetup::passes) costs a lookup.
std::shared_ptr<ScoringJob> MakePathFactJob(FactJobSetup setup, LinkPredictor::ScoreCallback done);

// GraIL: candidates within k + 1 hops on their own subgraphs, the others sharing one score.
std::shared_ptr<ScoringJob> MakeGrailRankingJob(RankingSetup setup,
                                                LinkPredictor::RankCallback done);
// The path family: one query, (fixed, r, ?) or its inverse (fixed, r^-1, ?), whose pass
// scores every candidate; entities beyond its neighbourhood share its far score.
std::shared_ptr<ScoringJob> MakePathRankingJob(RankingSetup setup,
                                               LinkPredictor::RankCallback done);

// Entity `name` of `graph`, or NOT_FOUND naming it.
absl::StatusOr<EntityId> FindEntity(const GraphSnapshot& graph, const std::string& name);

}  // namespace grail

#endif  // GRAIL_SERVER_SCORING_SCORING_JOBS_H_
