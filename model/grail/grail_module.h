// The TorchScript side of GrailModel. Includes LibTorch: only the few translation units that
// run the network (the model itself and the trainer) include this header.
#ifndef GRAIL_MODEL_GRAIL_GRAIL_MODULE_H_
#define GRAIL_MODEL_GRAIL_GRAIL_MODULE_H_

#include <torch/script.h>

#include "model/grail/subgraph_batch.h"

namespace grail {

struct GrailModule {
  torch::jit::Module module;
  torch::Device device;
  bool node_features = false;  // forward() takes each node's feature row (early fusion)
};

// The batch's arrays as int64 tensors on the module's device, in the order forward() takes
// them (node_feature among them for a module with node features).
std::vector<torch::jit::IValue> BatchInputs(const GrailModule& grail, const SubgraphBatch& batch,
                                            bool training);

// forward() over a batch: one score per subgraph. With `training`, edge dropout is on and
// autograd records the graph (the caller decides whether gradients are enabled).
torch::Tensor Forward(GrailModule& grail, const SubgraphBatch& batch, bool training);

}  // namespace grail

#endif  // GRAIL_MODEL_GRAIL_GRAIL_MODULE_H_
