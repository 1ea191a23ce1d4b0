// One model as the server serves it: the network, the archive it came from and its version,
// and its relation vocabulary by name. Calls hold a shared_ptr to the ServedModel they
// started with, so a reload (ReloadModel, SIGHUP) swaps the pointer without disturbing
// them: the old model lives until its last call finishes.
//
// Also the warm-up a model passes before it serves (WarmUp): it runs representative forwards so
// that the first user call does not pay for LibTorch's first runs (the TorchScript executor
// profiles and optimises the graph on its first calls, and allocators grow their pools).
//
// Thread safety: a ServedModel is immutable after LoadServedModel returns, except for the
// relation-map cache, which is guarded; every method may be called from any thread.
#ifndef GRAIL_SERVER_SCORING_SERVED_MODEL_H_
#define GRAIL_SERVER_SCORING_SERVED_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/relation_map.h"
#include "model/ensemble/ensemble_model.h"
#include "model/fusion/fusion_model.h"
#include "model/grail/grail_model.h"
#include "model/path/path_model.h"
#include "store/live_graph.h"

namespace grail {

class ServedFamily;  // server/scoring/scoring_jobs.h

// A fusion archive's KGE member, as GetStats describes it.
struct KgeMemberSummary {
  std::string kind;  // KgeKindName
  int dim = 0;
  uint32_t entities = 0;
  int32_t relations = 0;
  double weight = 0;  // the fused classifier's weight on its score
};

// What GetStats and /metrics say about a model, whatever its family.
struct ModelSummary {
  // The archive format: kGrailModelFormat, kPathModelFormat or kFusionModelFormat (then the
  // network fields are its GraIL model's).
  std::string format;
  int hops = 0;  // GraIL: the subgraph radius k; path: a query's neighbourhood radius
  int layers = 0;
  int dim = 0;
  int64_t parameters = 0;
  std::string training_fingerprint;
  std::string device;
  std::vector<KgeMemberSummary> kge_members;  // a fusion archive's
};

class ServedModel {
 public:
  // A model of a family the server knows (the registry: each constructor names the family's
  // served form, made by its jobs' file).
  ServedModel(std::shared_ptr<const GrailModel> model, std::string path, std::string sha256,
              uint64_t generation);
  ServedModel(std::shared_ptr<const PathModel> model, std::string path, std::string sha256,
              uint64_t generation);
  // A fusion archive: served as its GraIL model, whose scores its classifiers then combine
  // with the KGE models'.
  ServedModel(std::shared_ptr<const FusionModel> model, std::string path, std::string sha256,
              uint64_t generation);
  // An ensemble archive: each member served as a path model, their scores combined by its rule.
  ServedModel(std::shared_ptr<const EnsembleModel> model, std::string path, std::string sha256,
              uint64_t generation);
  // Any family's served form (ServedFamily), e.g. one the tests define.
  ServedModel(std::unique_ptr<const ServedFamily> family, std::string path, std::string sha256,
              uint64_t generation);
  ~ServedModel();
  ServedModel(const ServedModel&) = delete;
  ServedModel& operator=(const ServedModel&) = delete;

  // The family's jobs, runner, summary and warm-up.
  const ServedFamily& family() const { return *family_; }
  // The relation vocabulary in the model's id order.
  const std::vector<std::string>& relations() const;
  ModelSummary Summary() const;
  const std::string& path() const { return path_; }
  // Hex SHA-256 of the archive's bytes.
  const std::string& sha256() const { return sha256_; }
  // "PATH@" + the first 16 hex digits of sha256(): what responses carry.
  const std::string& version() const { return version_; }
  // 1 for the model loaded at start, one more per reload.
  uint64_t generation() const { return generation_; }
  double loaded_at_unix_seconds() const { return loaded_at_unix_seconds_; }

  // Whether the model scores any relation (ULTRA's): its relation ids are the graph's.
  bool open_vocabulary() const;
  // Whether it builds a graph of relations (ULTRA's, an ensemble with an ULTRA member): it
  // then scores only relations the graph has facts of, and its size is bounded.
  bool reads_relation_graph() const;
  // The model's id of relation `name` on `graph`, or INVALID_ARGUMENT naming it: not in the
  // model's vocabulary, or for a model of any relation, not in the graph.
  absl::StatusOr<int32_t> RelationId(absl::string_view name, const GraphSnapshot& graph) const;
  // The map from `graph`'s relation ids to the model's (MapRelationsByName). Cached: a
  // store only ever appends relation names, so a map built for the first n stays right and
  // is rebuilt only when a snapshot has more.
  std::shared_ptr<const RelationMap> RelationsOf(const GraphSnapshot& graph) const;

 private:
  const std::unique_ptr<const ServedFamily> family_;
  const std::string path_;
  const std::string sha256_;
  const std::string version_;
  const uint64_t generation_;
  const double loaded_at_unix_seconds_;
  absl::flat_hash_map<std::string, int32_t> relation_ids_;

  mutable std::mutex relation_map_mu_;
  mutable std::shared_ptr<const RelationMap> relation_map_;
};

// Loads the archive at `path` on `device` — GraIL, path-family or fused (LoadAnyModel: format
// and contents checked) — and fingerprints its bytes. Errors name the path: NOT_FOUND if it
// cannot be read, INVALID_ARGUMENT if it is not a model archive of this format, or a KGE
// model alone (it has no embedding for an entity added at runtime).
absl::StatusOr<std::shared_ptr<const ServedModel>> LoadServedModel(const std::string& path,
                                                                   absl::string_view device,
                                                                   uint64_t generation);

// Up to `count` stored facts of `graph` that `model` can score, drawn at random from the
// entities' out-edges (self-loops and relations the model does not know are skipped); fewer
// when the graph has few. For warm-ups: the shapes users will send.
std::vector<Triple> SampleStoredFacts(const ServedModel& model, const GraphSnapshot& graph,
                                      size_t count, uint64_t seed);

// The relations the stored graph uses (those with facts) that `model` does not know (their
// facts are left out of every subgraph it scores), in the graph's id order.
std::vector<std::string> UnknownRelations(const ServedModel& model, const GraphSnapshot& graph);

// Whether `model` can serve `graph` within `max_relation_side_pairs` (--max-relation-pairs):
// a model of any relation (ULTRA) builds a graph of relations from the pairs of relation
// sides that meet, and one past the bound (a store written under a higher bound) is refused
// with FAILED_PRECONDITION naming the flag, before a forward could exhaust memory. OK for
// other models and for 0 (no bound).
absl::Status CheckRelationGraphFits(const ServedModel& model, const GraphSnapshot& graph,
                                    uint64_t max_relation_side_pairs);

// A fact to warm up with, given by the graph's ids, and the model id of its relation.
struct WarmupFact {
  Triple fact;
  int32_t model_relation = 0;
};

// What a family's warm-up forwards run over (ServedFamily::WarmUp): facts of `graph`, the
// map from its relations to the model's, and each entity's name (empty for a synthetic one).
struct WarmupInput {
  const GraphView* graph = nullptr;
  const RelationMap* relations = nullptr;
  std::vector<WarmupFact> facts;  // never empty
  std::function<absl::string_view(EntityId)> entity_name;
};

// What a warm-up whose stop() became true ends with.
absl::Status StoppedWarmUp();

struct WarmupOptions {
  int batches = 3;      // forwards to run; 0: none
  int batch_size = 64;  // subgraphs per forward, at most
  int max_batch_nodes = 4096;
  int max_batch_edges = 8192;
  // A path model's queries are built as ScoreTriplet's are: pruned to `path_budget` within
  // the server's `path_cap` (RankLimits::ScoreBudget() and budget), and one whose
  // neighbourhood passes `max_subgraph_nodes` unpruned (0: no limit) is skipped, as serving
  // would refuse it. Without them a warm-up on a large graph read whole neighbourhoods: 10 GB
  // at the start of a server on a 10^6-entity graph, and no start at 10^7.
  PathBudget path_budget;
  PathBudget path_cap;
  int64_t max_subgraph_nodes = 0;
  uint64_t seed = 1;
  // Checked before each forward; once it returns true the warm-up ends with CANCELLED (a
  // reload whose caller has gone, a server stopping). May be empty.
  std::function<bool()> stop;
};

// Runs `options.batches` forwards of the model over enclosing subgraphs of facts sampled
// from `graph` (stored facts, so the shapes are those users will send): even forwards
// filled up to the batch limits, odd ones with a single subgraph (a lone ScoreTriplet's
// shape); with no facts stored, over a small synthetic graph of the model's relations.
// A path model runs its queries (the sampled facts' heads and relations) instead of
// subgraphs, within the same limits. A fusion archive warms up its GraIL model so, and then
// each KGE model with a fact and a ranking of every entity.
// Returns the number of forwards run (and KGE calls, for a fusion archive). An error (a forward
// failing) means the model cannot serve.
absl::StatusOr<int> WarmUp(const ServedModel& model, const GraphSnapshot& graph,
                           const WarmupOptions& options);

}  // namespace grail

#endif  // GRAIL_SERVER_SCORING_SERVED_MODEL_H_
