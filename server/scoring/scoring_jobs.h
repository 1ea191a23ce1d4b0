// What a family is to the server (ServedFamily): the jobs LinkPredictor hands the engine — one
// that scores a list of facts and one that ranks the candidates of (fixed, r, ?) or
// (?, r, fixed) — its summary and its warm-up. Each family's served form and jobs live in its
// own file (grail_jobs.cc, path_jobs.cc, kge_jobs.cc) and run on its runner (grail_work.h,
// path_work.h); what a ranking does whatever the family is in ranking.h. Nothing outside those
// files asks which family a model is.
#ifndef GRAIL_SERVER_SCORING_SCORING_JOBS_H_
#define GRAIL_SERVER_SCORING_SCORING_JOBS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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

// A job for the engine and the work it admits the call for (InferenceEngine::Submit).
struct SubmittedJob {
  std::shared_ptr<ScoringJob> job;
  size_t size = 0;
};

// Hands a job to the engine as part of the call a setup is for (LinkPredictor binds it to the
// call's control): a family whose answer takes several jobs, an ensemble's members one after
// another, submits the later ones through it. Submit before the earlier job's callback returns.
using JobSubmitter = std::function<void(SubmittedJob)>;

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
  JobSubmitter submit;
};

// A member's ranking, as an ensemble combines it (RankingSetup::member_scores): the candidates
// it scored on their own, by id, and the far score every other entity shares.
struct CandidateScores {
  std::vector<EntityId> near;     // sorted
  std::vector<float> score;       // near's
  std::vector<uint8_t> pruned;    // near's: a pruned pass did not visit it (it has the far score)
  std::vector<EntityId> not_far;  // over every entity: sorted, those not sharing the far score
  float far = 0;
  bool pruned_pass = false;  // the pass was pruned (Ranking::candidates_pruned)
};
using CandidateScoresCallback = std::function<void(absl::StatusOr<CandidateScores>)>;

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
  // Set: the ranking also says where this entity ranks among every candidate
  // (Ranking::answer_rank), whatever top_k keeps.
  std::optional<EntityId> answer;
  PathBudget budget;            // the call's (the server's unless it asked for less)
  PathBudget cap;               // the server's
  PassCache* passes = nullptr;  // the path family's pass cache (null: none); exact passes only
  JobSubmitter submit;
  // Set for an ensemble's member: the job ends by handing every candidate's own score and the
  // far score here, unfiltered and untruncated, instead of a Ranking to its callback (which is
  // then not called). The path family's jobs and GraIL's (not a fusion archive's) support it.
  CandidateScoresCallback member_scores;
};

// One model family as the server serves it, made once per served model (ServedModel).
class ServedFamily {
 public:
  virtual ~ServedFamily() = default;
  // The relation vocabulary in the model's id order (a model of any relation: empty).
  virtual const std::vector<std::string>& relations() const = 0;
  // Whether the model scores any relation, its ids the graph's (ULTRA's).
  virtual bool open_vocabulary() const { return false; }
  // Whether it builds a graph of relations (ServedModel::reads_relation_graph).
  virtual bool reads_relation_graph() const { return open_vocabulary(); }
  virtual ModelSummary Summary() const = 0;
  // Whether a ScoreTriplet call may ask for `explain_paths` paths per fact: INVALID_ARGUMENT
  // saying why not where the family has none.
  virtual absl::Status CheckExplanations(int explain_paths) const = 0;
  virtual SubmittedJob FactJob(FactJobSetup setup, int explain_paths,
                               LinkPredictor::ScoreCallback done) const = 0;
  virtual SubmittedJob RankingJob(RankingSetup setup, LinkPredictor::RankCallback done) const = 0;
  // The warm-up's forwards over `input` (served_model.h's WarmUp): how many ran. `served`
  // names the model in errors.
  virtual absl::StatusOr<int> WarmUp(const ServedModel& served, const WarmupInput& input,
                                     const WarmupOptions& options) const = 0;
  // Of `asked` stored facts, how many a warm-up of the whole serving path scores.
  virtual size_t ServingWarmUpFacts(size_t asked) const { return asked; }
};

// GraIL (and a fusion archive, `fused` when set, served as its GraIL model `model`): each fact
// on its own enclosing subgraph, with its strongest paths when asked; a ranking scores the
// candidates within k + 1 hops on their own subgraphs, the others sharing one score.
std::unique_ptr<const ServedFamily> ServeGrail(std::shared_ptr<const GrailModel> model,
                                               std::shared_ptr<const FusionModel> fused);
// The path family (ULTRA's included): facts that share a head and a relation share one query,
// whose pass scores their tails, and a ranking is one query, (fixed, r, ?) or its inverse
// (fixed, r^-1, ?), whose pass scores every candidate; entities beyond its neighbourhood share
// its far score. A query whose pass is cached (FactJobSetup::passes) costs a lookup.
std::unique_ptr<const ServedFamily> ServePath(std::shared_ptr<const PathModel> model);

// An ensemble (model/ensemble/ensemble_model.h): each member served as ServePath, ServeGrail or
// ServeKgeMember serves it, one after another on the call's snapshot (each path member's
// passes batched and cached as its own), and each fact's or candidate's score the ensemble's
// rule over the members'; in a ranking over every entity, an entity beyond every member's
// neighbourhood shares the rule over their far scores. Explanations come from its first GraIL
// member.
// `path`, `sha256` and `generation` are the archive's.
std::unique_ptr<const ServedFamily> ServeEnsemble(std::shared_ptr<const EnsembleModel> model,
                                                  const std::string& path,
                                                  const std::string& sha256, uint64_t generation);

// The KGE model that is `ensemble`'s member m (kge_jobs.cc), as the ensemble serves it: a
// fact, and a ranking's candidate, that it knows by name scores as the model scores it, any
// other has the member's unknown score (EnsembleModel::unknown_score). Its jobs run no forward
// of the engine's: a ranking is one pass over the model's vocabulary. Only an ensemble ranks
// with it (RankingSetup::member_scores).
std::unique_ptr<const ServedFamily> ServeKgeMember(std::shared_ptr<const EnsembleModel> ensemble,
                                                   size_t m);

// Entity `name` of `graph`, or NOT_FOUND naming it.
absl::StatusOr<EntityId> FindEntity(const GraphSnapshot& graph, const std::string& name);

}  // namespace grail

#endif  // GRAIL_SERVER_SCORING_SCORING_JOBS_H_
