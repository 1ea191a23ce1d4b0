// ULTRA (Galkin et al., "Towards Foundation Models for Knowledge Graph Reasoning", ICLR 2024):
// the path model (model/path/path_model.h) with its relation vectors computed instead of
// learned, composed of two networks of the one relational layer as its paper draws it.
//
// Over the graph of relations of the graph being scored (relation_graph.h: a node per relation
// and inverse, four kinds of edge for how two relations meet at an entity), a network of its
// own runs from the query relation:
//   x_a^0 = 1[a = q] 1                                  (all ones at the query relation)
//   x_a^l = ReLU(LayerNorm(U_l [x_a^(l-1), sum over b -k-> a of x_b^(l-1) * u_k^l + x_a^0]
//           + c_l)) + x_a^(l-1)
// and the entity network (path_model.h's equations) uses q = x_q^L and, in layer l,
// w_r(q) = P_l(x_r^L) with P_l a two-layer perceptron. The model has no relation vocabulary:
// any relation of any graph is scored, those added after training included.
//
// Its models are PathModels that run UltraNetwork() (ultra_network.h): they score, train, save
// and serve as the path family's do. Archives of format grail-kg-ultra-model/1 (LoadAnyModel
// opens them); the released checkpoints import (ImportUltraCheckpoint, grail-tools
// import-ultra). No LibTorch in this header.
#ifndef GRAIL_MODEL_ULTRA_ULTRA_MODEL_H_
#define GRAIL_MODEL_ULTRA_ULTRA_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/path/path_model.h"

namespace grail {

inline constexpr char kUltraModelFormat[] = "grail-kg-ultra-model/1";

// ULTRA's network as its released checkpoints have it: 6 relation-graph and 6 entity layers
// of 64, sum aggregation, layer norm, short-cut, no reach mask. Shrink the sizes for tests.
inline PathConfig UltraConfig() {
  PathConfig c;
  c.relation_graph = true;
  c.reach_mask = false;
  c.dependent = false;
  c.num_layers = 6;
  c.relation_layers = 6;
  c.dim = 64;
  return c;
}

// A freshly initialised ULTRA model of `config` (UltraConfig(), resized), parameters drawn
// from `seed`. Errors as PathModel::Create's.
absl::StatusOr<std::unique_ptr<PathModel>> CreateUltraModel(const PathConfig& config, uint64_t seed,
                                                            absl::string_view device = "cpu");

// Turns a released ULTRA checkpoint (a torch.save file whose "model" entry is the state dict
// of DeepGraphLearning/ULTRA's Ultra module, e.g. ultra_3g.pth) into a grail-kg-ultra-model/1
// archive at `out`. Only tensors and plain containers are read (model/core/checkpoint_reader.h:
// no pickled code runs); every tensor is mapped by name and shape, and the layer counts and
// width are read off the names. Errors: NOT_FOUND for an unreadable file; INVALID_ARGUMENT
// naming the file and what it holds that is not data, or the tensor that is missing, of another
// shape or unknown. `inverse_head_queries`: the archive's PathConfig::inverse_head_queries.
absl::Status ImportUltraCheckpoint(const std::string& checkpoint, const std::string& out,
                                   bool inverse_head_queries = false);

}  // namespace grail

#endif  // GRAIL_MODEL_ULTRA_ULTRA_MODEL_H_
