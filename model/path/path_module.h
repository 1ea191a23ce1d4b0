// The TorchScript side of PathModel. Includes LibTorch: only the path model and its trainer
// include this header.
#ifndef GRAIL_MODEL_PATH_PATH_MODULE_H_
#define GRAIL_MODEL_PATH_PATH_MODULE_H_

#include <torch/script.h>

#include <utility>

#include "model/path/path_batch.h"

namespace grail {

struct PathModule {
  torch::jit::Module module;
  torch::Device device;
  // Whether the module is the fused formulation (PathMessagePassing::kFused), whose forward
  // takes either batch layout; otherwise the per-edge one, disjoint batches only.
  bool fused = true;
  // ULTRA's network (PathConfig::relation_graph): forward also takes the relation graph.
  bool relation_graph = false;
};

// forward() over a batch: the score of every node for its query, and every query's far score.
// Autograd records the graph unless the caller disabled it.
std::pair<torch::Tensor, torch::Tensor> PathForward(PathModule& path, const PathBatch& batch);

}  // namespace grail

#endif  // GRAIL_MODEL_PATH_PATH_MODULE_H_
