// The path-based scorer: a second model family beside GraIL, after NBFNet (Zhu et al.,
// NeurIPS 2021, Sections 3-4), behind a LibTorch-free interface.
//
// For a query (h, q, ?) the network runs relational message passing from h alone and reads
// every entity's score off its final state, so one pass ranks all tails; (?, q, t) is the
// inverse query (t, q^-1, ?). Like GraIL it learns no entity embeddings, so it scores
// entities that did not exist at training time. Per query, with query vector q = e_q:
//   h_v^0 = 1[v = h] q                                            (boundary condition)
//   m_e   = h_u^(l-1) * w_r(q)       for each edge u -r-> v        (DistMult message)
//   a_v   = sum_e m_e + h_v^0                                      (sum; or PNA over them)
//   h_v^l = ReLU(LayerNorm(W_l [h_v^(l-1), a_v] + b_l)) * 1[d(h, v) <= l] + h_v^(l-1)
//           (the factor only with PathConfig::reach_mask, the default)
//   s(h, q, v) = MLP([h_v^L, q])     (MLP([h_v^L, q, 1[d(h, v) <= L]]) with reach_feature)
// w_r(q) = W_r q + b_r (query-dependent relation vectors; or a free vector per relation).
// The factor 1[d(h, v) <= l] keeps an entity that no path of length <= l reaches at the
// semiring's zero, as the generalised Bellman-Ford iteration does; it makes the state of an
// entity depend only on the graph within L hops of h (model/path/path_batch.h), and gives every
// entity beyond L hops the same "far" score, MLP([0, q]).
// Without the factor an entity no path reaches still gets a state of its own (from its own
// surroundings: layer norm of the bias, passed on by its neighbours), a prior the same for
// every source. PathConfig::reach_feature lets the MLP tell such an entity from a reached one.
//
// Like GrailModel there is one definition: a TorchScript module generated from a
// PathConfig; trainer, evaluator and server use the same archive.
//
// A learned priority (PathConfig::priority), after A*Net (Zhu et al., NeurIPS 2023): each
// entity's priority is its own score s_v = MLP([h_v, q]) on its current state (the unreached:
// MLP([0, q]), the far score), and layer l propagates only from the entities reached so far,
// each message gated by how plausible its sender is:
//   x_u   = sigmoid(s_u^(l-1)) h_u^(l-1)
//   a_v   = sum over chosen edges u -r-> v of x_u * w_r(q) + h_v^0
//   h_v^l = h_v^(l-1) + ReLU(LayerNorm(W_l [x_v, a_v] + b_l))   for each v a chosen edge enters
// (other entities keep their state; without short-cut the new state replaces it). Unpruned,
// the chosen edges are every edge out of a reached entity. Pruned to k entities a layer
// (PathBatch::layer_nodes), they are the edges out of the k reached entities of highest
// priority, at most degree_ratio * k * (the query's mean degree) of them, those whose
// destination's priority is highest. The gate is what trains the priority: a choice is not
// differentiable, but a sender's weight is. Training prunes too (`prune_node_ratio`, a share
// of the graph's entities), so the model learns to rank what it should propagate from; only
// reached entities are ever updated, so the reach mask holds by construction.
//
// ULTRA (Galkin et al., ICLR 2024) is this network with its relation vectors computed instead
// of learned (PathConfig::relation_graph), from a second network over the graph of relations;
// it lives in model/ultra/ (ultra_model.h), which hands its network to this model.
//
// Thread safety: Score() may be called from several threads at once; Save() and the
// trainer's access to module() must not run concurrently with anything else.
#ifndef GRAIL_MODEL_PATH_PATH_MODEL_H_
#define GRAIL_MODEL_PATH_PATH_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "graph/relation_map.h"
#include "model/path/path_batch.h"

namespace grail {

// Archives of the fused formulation; /1 archives (the per-edge one) load rebuilt as /2.
inline constexpr char kPathModelFormat[] = "grail-kg-path-model/2";
inline constexpr char kPathModelFormatPerEdge[] = "grail-kg-path-model/1";

// How a layer passes its messages.
//   kFused: the fused operator (model/ops/rspmm.h): no per-edge tensor, forward or backward,
//     and either batch layout (model/path/path_batch.h), one graph shared by a batch included.
//     What every model is created as, and what Load() turns every archive into.
//   kPerEdge: every message materialised (index_select, index_add, scatter_reduce) over one
//     disjoint neighbourhood per query: how archives of format /1 compute. The reference the
//     fused formulation is tested and benchmarked against; Create() only.
enum class PathMessagePassing { kFused, kPerEdge };

struct PathConfig {
  int num_layers = 6;
  int dim = 32;
  // Aggregation: false sums the messages; true is PNA (mean, max, min and standard deviation
  // of the messages, each scaled by 1, s and 1/s with s = log(degree + 1) / pna_delta).
  bool pna = false;
  bool dependent = true;  // relation vectors computed from the query; false: one per relation
  bool layer_norm = true;
  bool short_cut = true;
  // PNA's delta: the mean of log(degree + 1) over the training graph's entities.
  double pna_delta = 1.0;
  // true: an entity no path of length <= l reaches has state 0 after layer l (the factor
  // 1[d(h, v) <= l] of the equations), so a query needs only its source's neighbourhood and
  // every entity beyond shares one score. false: as the path model's paper computes it, every
  // entity's state is updated at every layer, so an entity that no path from h reaches still
  // gets a score of its own (from its own neighbourhood's structure and the query relation),
  // and a query runs over the whole graph.
  bool reach_mask = true;
  // true: the scoring MLP also reads whether a path of at most L facts from the source
  // reaches the entity (1[d(h, v) <= L]). Without the reach mask an unreached entity's state
  // is a prior of its own surroundings, which can outrank every reached entity for every
  // source; the bit lets training learn how far to trust that prior. With the mask it changes
  // nothing an unreached entity's state does not already say. Archives without it: false.
  bool reach_feature = false;
  PathMessagePassing message_passing = PathMessagePassing::kFused;
  // ULTRA (model/ultra/ultra_model.h): relation vectors and the query vector from a network of
  // `relation_layers` layers over the graph of relations, instead of one learned vector per
  // relation. Sum aggregation, no reach mask, no reach feature, the fused operator.
  bool relation_graph = false;
  int relation_layers = 6;
  // ULTRA: where a head query (?, r, t), run as (t, r^-1, ?), starts the graph of relations:
  // false at r, as ULTRA's code does (its released weights were trained so); true at r^-1,
  // the query relation itself. The query vector is r^-1's final state either way.
  bool inverse_head_queries = false;
  // The learned priority (above): sum aggregation, the reach mask, no reach feature, the
  // fused operator. Training propagates, per layer, from prune_node_ratio of the graph's
  // entities (1: every reached one) along at most prune_degree_ratio times their mean degree
  // of edges each; serving from the call's budget (PathBudget::layer_nodes) with the same
  // degree ratio.
  bool priority = false;
  double prune_node_ratio = 1.0;
  double prune_degree_ratio = 1.0;

  // Hops of neighbourhood a query needs (model/path/path_batch.h); -1: the whole graph.
  int radius() const { return reach_mask ? num_layers + (pna ? 1 : 0) : -1; }
};

// Scores of one forward: `node[i]` for node i of the batch (its query's score of that
// entity), `far[q]` for every entity beyond query q's neighbourhood. For a query pruned to a
// budget (PathBatch::query_pruned) that is every entity the pruned pass did not visit, and
// far[q] is the lesser of the far score, MLP([0, q]), and the least score of an entity it
// visited: with the reach mask the far score is what the model gives every entity beyond its
// reach and is seldom above it, but without the mask no entity has a zero state in training,
// and the far score can rank every unvisited entity above the answers the pass did find
// (fb237_v1_ind, 10% of the entities: ULTRA's filtered MRR 0.370 with the far score, 0.383
// with the least visited one; exact 0.435).
struct PathScores {
  std::vector<float> node;
  std::vector<float> far;
  // Where the learned priority pruned the pass (PrunesByPriority): per query, the entities it
  // reached and the messages its layers passed, and per node whether it reached it (1), the
  // others of its neighbourhood having the far score as every entity beyond does; otherwise
  // empty.
  std::vector<int64_t> reached;
  std::vector<int64_t> messages;
  std::vector<uint8_t> node_reached;

  // Whether the pass left node i of the batch unvisited (it has the far score).
  bool Unvisited(int64_t i) const { return !node_reached.empty() && node_reached[i] == 0; }

  // Score of `entity` for query q of `batch`.
  float Of(const PathBatch& batch, int64_t q, EntityId entity) const {
    const int64_t node_index = batch.NodeOf(q, entity);
    return node_index >= 0 ? node[node_index] : far[q];
  }
};

// The TorchScript module and the network it runs; see model/path/path_module.h (LibTorch
// inside).
struct PathModule;
class PathNetworkDefinition;

class PathModel {
 public:
  // A freshly initialised model (parameters drawn from `seed`) for `relations` in id order.
  // `network`: the network's definition, NBFNet's and A*Net's when null (ULTRA's models are
  // made by model/ultra/ultra_model.h). Errors: INVALID_ARGUMENT for a bad config;
  // FAILED_PRECONDITION for CUDA when absent.
  static absl::StatusOr<std::unique_ptr<PathModel>> Create(
      const PathConfig& config, std::vector<std::string> relations, uint64_t seed,
      absl::string_view device = "cpu", const PathNetworkDefinition* network = nullptr);
  // Opens an archive written by Save() of NBFNet's or A*Net's network (LoadAnyModel opens any
  // family's, ULTRA's included). Errors name the path and what is wrong.
  static absl::StatusOr<std::unique_ptr<PathModel>> Load(const std::string& path,
                                                         absl::string_view device = "cpu");
  // The model of an archive module already opened from `path` on `device`
  // (LoadAnyModel): checks its format, config and parameters as Load() does. `network` as
  // for Create().
  static absl::StatusOr<std::unique_ptr<PathModel>> FromModule(
      std::unique_ptr<PathModule> module, const std::string& path, absl::string_view device,
      const PathNetworkDefinition* network = nullptr);
  ~PathModel();

  absl::Status Save(const std::string& path) const;

  const PathConfig& config() const { return config_; }
  // The format of its archives (its network's).
  std::string format() const;
  // The relations the model learned a vector for, in id order; empty for ULTRA's models,
  // which score the relations of whatever graph they are given.
  const std::vector<std::string>& relations() const { return relations_; }
  int32_t num_relations() const { return static_cast<int32_t>(relations_.size()); }
  // Whether any relation name is scorable (ULTRA): graph relation ids are the model's.
  bool open_vocabulary() const { return config_.relation_graph; }
  // R of the message relations on `graph`: the model's, or for ULTRA the graph's.
  int32_t NumRelations(const GraphView& graph) const {
    return open_vocabulary() ? static_cast<int32_t>(graph.num_relations()) : num_relations();
  }
  const std::string& training_fingerprint() const { return fingerprint_; }
  void set_training_fingerprint(std::string fingerprint) { fingerprint_ = std::move(fingerprint); }
  const std::string& device() const { return device_; }
  int64_t num_parameters() const;
  // INVALID_ARGUMENT naming the first parameter that holds a NaN or an infinity (a training
  // that diverged), as loading such an archive is refused.
  absl::Status CheckFinite() const;
  // What this model's queries on `graph` are built from (model/path/path_batch.h): its radius,
  // and for queries with targets its path length and aggregation.
  // R in the spec is the model's, or for ULTRA the graph's (and `relations` is ignored:
  // graph ids are the model's).
  PathNeighbourhoodSpec Neighbourhood(const GraphView* graph, const RelationMap* relations,
                                      int64_t max_nodes) const;

  // How a query's neighbourhood is pruned for a call's budget within the server's `cap`
  // (PathBudget): without a learned priority, to the call's budget; with one, only to the cap
  // (what is materialised), and each layer within it to the call's nodes, chosen by the
  // priority (PathBudget::layer_nodes; none when the call's nodes are 0).
  PathBudget Pruning(const PathBudget& call, const PathBudget& cap) const {
    if (!config_.priority) return call;
    return PathBudget{cap.nodes, cap.edges, call.nodes};
  }

  // One forward over every query of `batch`, in inference mode. Errors: INVALID_ARGUMENT for
  // an empty batch.
  absl::StatusOr<PathScores> Score(const PathBatch& batch) const;

  PathModule& module() { return *module_; }

 private:
  PathModel(PathConfig config, std::vector<std::string> relations, std::string device,
            std::unique_ptr<PathModule> module);

  PathConfig config_;
  std::vector<std::string> relations_;
  std::string fingerprint_;
  std::string device_;
  std::unique_ptr<PathModule> module_;
};

}  // namespace grail

#endif  // GRAIL_MODEL_PATH_PATH_MODEL_H_
