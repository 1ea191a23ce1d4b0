// The TorchScript side of PathModel. Includes LibTorch: only the path model and its trainer
// include this header.
#ifndef GRAIL_MODEL_PATH_PATH_MODULE_H_
#define GRAIL_MODEL_PATH_PATH_MODULE_H_

#include <torch/script.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "model/path/path_batch.h"
#include "model/path/path_model.h"
#include "model/path/relational_layer.h"

namespace grail {

// A network a path model runs: NBFNet's and A*Net's (PathNetworks(), path_network.cc) or
// ULTRA's (UltraNetwork(), model/ultra/ultra_network.h). The family that defines one hands it
// to PathModel::Create or FromModule; the model then builds, checks and runs it through this.
class PathNetworkDefinition {
 public:
  virtual ~PathNetworkDefinition() = default;
  // The format archives of `c` carry, and whether an archive of `format` holds this network.
  virtual std::string Format(const PathConfig& c) const = 0;
  virtual bool Reads(absl::string_view format) const = 0;
  // Whether `c` is a network of this kind with `num_relations` learned relation vectors (0: an
  // open vocabulary). PathModel checks what every network shares (layers, width) first.
  virtual absl::Status Validate(const PathConfig& c, size_t num_relations) const = 0;
  // The module's TorchScript source, and its parameters, freshly initialised, in the order
  // archives hold them.
  virtual std::string Source(const PathConfig& c) const = 0;
  virtual void RegisterParameters(const PathConfig& c, int64_t num_relations,
                                  torch::jit::Module& m) const = 0;
  // Attributes of its own beyond those every path network has: written into a new module, and
  // read back from an archive this network Reads() into `c`.
  virtual void RegisterAttributes(const PathConfig& c, torch::jit::Module& m) const {}
  virtual void ReadAttributes(const torch::jit::Module& m, PathConfig& c) const {}
  // What forward() takes after the seven inputs every path network takes (PathForward).
  virtual void AppendInputs(const PathBatch& batch, const torch::Device& device,
                            std::vector<torch::jit::IValue>& inputs) const {}
};

// NBFNet's and A*Net's networks (path_network.cc): what PathModel runs unless told otherwise.
const PathNetworkDefinition& PathNetworks();

struct PathModule {
  torch::jit::Module module;
  torch::Device device;
  // Whether the module is the fused formulation (PathMessagePassing::kFused), whose forward
  // takes either batch layout; otherwise the per-edge one, disjoint batches only.
  bool fused = true;
  // The network it runs; set by PathModel (null only before).
  const PathNetworkDefinition* network = nullptr;
  // A learned priority (PathConfig::priority) and the degree ratio it prunes edges with.
  bool priority = false;
  double degree_ratio = 1.0;
};

// What a pass pruned by the learned priority did, per query: the most entities one of its
// layers propagated from, the most edges one passed messages along, the messages of all its
// layers, and the entities it reached (the rest have the far score).
struct PrioritizedStats {
  std::vector<int64_t> most_chosen;
  std::vector<int64_t> most_edges;
  std::vector<int64_t> messages;
  std::vector<int64_t> reached;
  // Per node of the batch: 1 where reached.
  std::vector<uint8_t> node_reached;
};

// Registers the parameters of layers 0 .. layers - 1 of `layer` on `m`, freshly initialised, in
// the order archives hold them: per layer the messages' (relation_w and relation_b; or
// relation, one row per relation; or project_w1, b1, w2, b2), combine_w, combine_b, and the
// layer norm's. `relations`: the relation vectors a layer has (for the first two kinds).
void RegisterLayerParameters(const RelationalLayer& layer, int layers, int64_t d, int64_t relations,
                             torch::jit::Module& m);

// Registers the scoring MLP's parameters (relational_layer.h's ScoringMethods), freshly
// initialised: mlp_w1, mlp_b1, mlp_w2, mlp_b2.
void RegisterScoringParameters(int64_t d, bool reach_feature, torch::jit::Module& m);

// forward() over a batch: the score of every node for its query, and every query's far score.
// Autograd records the graph unless the caller disabled it.
std::pair<torch::Tensor, torch::Tensor> PathForward(PathModule& path, const PathBatch& batch);

// Whether a forward over `batch` is pruned by the model's learned priority: some query's
// neighbourhood holds more entities than its layers may propagate from (layer_nodes).
bool PrunesByPriority(const PathModule& path, const PathBatch& batch);

// The forward of a model with a learned priority, layer by layer from C++ over each layer's
// chosen subgraph (model/path/path_model.h), each query pruned to its layer_nodes (none: every
// reached entity propagates, as forward() computes it). A disjoint batch. PathForward calls it
// where PrunesByPriority; `stats` (may be null) says what it did.
std::pair<torch::Tensor, torch::Tensor> PrioritizedForward(PathModule& path, const PathBatch& batch,
                                                           PrioritizedStats* stats);

}  // namespace grail

#endif  // GRAIL_MODEL_PATH_PATH_MODULE_H_
