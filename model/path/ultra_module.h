// The TorchScript side of ULTRA's models (PathConfig::relation_graph; model/path/path_model.h).
// Includes LibTorch: only the path model and the importer include this header.
#ifndef GRAIL_MODEL_PATH_ULTRA_MODULE_H_
#define GRAIL_MODEL_PATH_ULTRA_MODULE_H_

#include <torch/script.h>

#include <string>

#include "model/path/path_model.h"

namespace grail {

// The network's source over the fused operator, one line per equation of path_model.h's
// ULTRA paragraph.
std::string UltraModuleSource(const PathConfig& c);

// Registers the parameters (freshly initialised) on `m`: 168,705 of them at ULTRA's size
// (6 + 6 layers of 64 dimensions).
void RegisterUltraParameters(const PathConfig& c, torch::jit::Module& m);

// The relation graph tensors of `batch` (model/path/relation_graph.h) on `device`: src, kind, dst.
std::tuple<torch::Tensor, torch::Tensor, torch::Tensor> UltraRelationGraph(
    const PathBatch& batch, const torch::Device& device);

}  // namespace grail

#endif  // GRAIL_MODEL_PATH_ULTRA_MODULE_H_
