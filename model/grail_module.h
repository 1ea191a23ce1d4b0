// The TorchScript side of GrailModel. Includes LibTorch: only the few translation units that
// run the network (the model itself and the trainer) include this header.
#ifndef GRAIL_MODEL_GRAIL_MODULE_H_
#define GRAIL_MODEL_GRAIL_MODULE_H_

#include <torch/script.h>

#include "model/subgraph_batch.h"

namespace grail {

struct GrailModule {
  torch::jit::Module module;
  torch::Device device;
};

// The batch's arrays as int64 tensors on `device`, in the order forward() takes them.
std::vector<torch::jit::IValue> BatchInputs(const SubgraphBatch& batch, const torch::Device& device,
                                            bool training);

// forward() over a batch: one score per subgraph. With `training`, edge dropout is on and
// autograd records the graph (the caller decides whether gradients are enabled).
torch::Tensor Forward(GrailModule& grail, const SubgraphBatch& batch, bool training);

}  // namespace grail

#endif  // GRAIL_MODEL_GRAIL_MODULE_H_
