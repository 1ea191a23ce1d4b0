// The GraIL network (paper Section 3; SPEC "GraIL, precisely" steps 3-4) behind a
// LibTorch-free interface.
//
// There is one definition of the model: a TorchScript module whose source is generated from
// a GrailConfig (model/grail/grail_model.cc). The trainer trains that module, saves it as a
// TorchScript archive, and the evaluator and the server load the same archive; Python's
// torch.jit.load opens it too. The archive carries everything needed to use it: the config,
// the relation vocabulary in id order, the training data's fingerprint and a format version.
//
// Thread safety: Score() may be called from several threads at once; Save() and the
// trainer's access to module() must not run concurrently with anything else.
#ifndef GRAIL_MODEL_GRAIL_GRAIL_MODEL_H_
#define GRAIL_MODEL_GRAIL_GRAIL_MODEL_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/vocabulary.h"
#include "model/grail/enclosing_subgraph.h"
#include "model/grail/subgraph_batch.h"

namespace grail {

// Written into every archive; Load() refuses archives of another format.
inline constexpr char kGrailModelFormat[] = "grail-kg-model/1";

struct GrailConfig {
  // Subgraphs.
  int hops = 3;               // k: neighbourhood radius, label range 0..k
  int max_nodes_per_hop = 0;  // per-hop cap of the extraction (0: none)
  bool enclosing = true;      // false: the "no enclosing subgraph" ablation
  // Network.
  bool node_labels = true;  // false: constant labels (1, 1), the "no node labels" ablation
  bool attention = true;    // false: the "no attention" ablation (alpha = 1)
  int num_layers = 3;
  int dim = 32;           // hidden state size of every layer
  int num_bases = 4;      // R-GCN basis decomposition
  int relation_dim = 32;  // size of e_r (readout) and e^a_r (attention)
  double edge_dropout = 0.5;
  // false: the paper's h' = ReLU(W_self h + a) for every node. true: a node with no incoming
  // edge in its subgraph has state 0 after every layer, as the reference implementation's
  // DGL update_all leaves it (the self-connection only reaches a node through its in-edges'
  // messages there, so a node that receives none gets the zero-initialised feature).
  bool zero_without_in_edges = false;
  // How a layer whose input is narrower than its output (layer 0: the 2(k+1) labels) is
  // computed: true mixes inputs per edge and applies the bases once per node, false applies
  // the bases per node first (the plain form). The same function either way, so this is an
  // implementation choice: not stored in archives; tests compare the two forms.
  bool narrow_input_layers = true;
  // Early fusion (the paper's "GraIL++", Section 5.2): the width of fixed per-entity features
  // (pretrained KGE embeddings) concatenated to each node's labels, with one flag bit that is
  // 1 for an entity without features (its features are zeros). 0: none, the plain model.
  int node_feature_dim = 0;

  ExtractionConfig extraction() const {
    ExtractionConfig c;
    c.hops = hops;
    c.max_nodes_per_hop = max_nodes_per_hop;
    c.enclosing = enclosing;
    return c;
  }
  // Size of a node's labels: one-hot d(i,u) and d(i,v), each over 0..k.
  int label_dim() const { return 2 * (hops + 1); }
  // Size of a node's input to the first layer: the labels, then any node features and their
  // flag bit.
  int input_dim() const { return label_dim() + (node_feature_dim > 0 ? node_feature_dim + 1 : 0); }
};

// Fixed node features for early fusion: row i (`dim` numbers of `values`, row-major) belongs
// to entities[i]. An entity of a graph not listed gets zeros and the flag bit.
struct NodeFeatures {
  std::vector<std::string> entities;
  int dim = 0;
  std::vector<float> values;  // entities.size() * dim
};

// The feature row of each node of `subgraph` from `rows` (graph entity id -> the model's row,
// GrailModel::NodeFeatureRows), for a model with node features; every node's id must be in
// `rows`.
void AttachNodeFeatures(absl::Span<const int32_t> rows, EnclosingSubgraph* subgraph);

class GrailModel;
// The same by name, for a graph whose ids the model's rows do not follow (a live graph): each
// node's row is model.NodeFeatureRow(name(node)). A no-op for a model without node features.
void AttachNodeFeatures(const GrailModel& model,
                        const std::function<absl::string_view(EntityId)>& name,
                        EnclosingSubgraph* subgraph);

struct GrailModule;  // the TorchScript module; see model/grail/grail_module.h (LibTorch inside)

class GrailModel {
 public:
  // A freshly initialised model (parameters drawn from `seed`) for `relations`, the
  // relation vocabulary in id order. `device` is "cpu" or "cuda[:N]". Errors:
  // INVALID_ARGUMENT for a bad config; FAILED_PRECONDITION if CUDA is requested but absent.
  // With config.node_feature_dim > 0, `features` gives every node's fixed features (early
  // fusion); its dim must equal node_feature_dim.
  static absl::StatusOr<std::unique_ptr<GrailModel>> Create(const GrailConfig& config,
                                                            std::vector<std::string> relations,
                                                            uint64_t seed,
                                                            absl::string_view device = "cpu",
                                                            const NodeFeatures* features = nullptr);
  // Opens an archive written by Save(). Errors name the path and what is wrong.
  static absl::StatusOr<std::unique_ptr<GrailModel>> Load(const std::string& path,
                                                          absl::string_view device = "cpu");
  // The model of an archive module already opened from `path` on `device`
  // (LoadAnyModel): checks its format, config and parameters as Load() does.
  static absl::StatusOr<std::unique_ptr<GrailModel>> FromModule(std::unique_ptr<GrailModule> module,
                                                                const std::string& path,
                                                                absl::string_view device);
  ~GrailModel();

  // Writes the archive (config, relations, fingerprint and format as module attributes).
  absl::Status Save(const std::string& path) const;

  const GrailConfig& config() const { return config_; }
  const std::vector<std::string>& relations() const { return relations_; }
  // A hash of the training data, so a served model can be traced to what it learnt from.
  const std::string& training_fingerprint() const { return fingerprint_; }
  void set_training_fingerprint(std::string fingerprint) { fingerprint_ = std::move(fingerprint); }
  const std::string& device() const { return device_; }
  int64_t num_parameters() const;

  // Early fusion: the feature row of an entity by name, or the zero row (with the flag bit)
  // for an entity without features; 0 for a model without node features.
  int32_t NodeFeatureRow(absl::string_view entity) const;
  // NodeFeatureRow of each name: the rows of a graph's entities, in its id order.
  std::vector<int32_t> NodeFeatureRows(absl::Span<const std::string> entities) const;
  // The entities with features, in row order (none for a model without node features).
  const std::vector<std::string>& node_feature_entities() const {
    return feature_entities_.names();
  }

  // Scores every subgraph of `batch` in one forward pass, in inference mode (no dropout,
  // no gradients). Errors: INVALID_ARGUMENT for an empty or inconsistent batch (for a model
  // with node features: one without a feature row per node).
  absl::StatusOr<std::vector<float>> Score(const SubgraphBatch& batch) const;

  // The attention coefficient alpha of every edge of `batch`, per layer: result[l][e] for
  // layer l (0-based) and batch edge e, in inference mode. 1 for every edge of a model
  // without attention. Errors as Score().
  absl::StatusOr<std::vector<std::vector<float>>> EdgeAttention(const SubgraphBatch& batch) const;

  // The module itself, for the trainer.
  GrailModule& module() { return *module_; }

 private:
  GrailModel(GrailConfig config, std::vector<std::string> relations, std::string device,
             std::unique_ptr<GrailModule> module);
  // INVALID_ARGUMENT unless a model with node features gets a row in range for every node.
  absl::Status CheckNodeFeatures(const SubgraphBatch& batch) const;

  GrailConfig config_;
  std::vector<std::string> relations_;
  std::string fingerprint_;
  std::string device_;
  std::unique_ptr<GrailModule> module_;
  Vocabulary feature_entities_;  // early fusion: entity name -> feature row
};

}  // namespace grail

#endif  // GRAIL_MODEL_GRAIL_GRAIL_MODEL_H_
