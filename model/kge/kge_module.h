// The TorchScript side of KgeModel. Includes LibTorch: only the KGE model and its trainer
// include this header.
#ifndef GRAIL_MODEL_KGE_KGE_MODULE_H_
#define GRAIL_MODEL_KGE_KGE_MODULE_H_

#include <torch/script.h>

namespace grail {

struct KgeModule {
  torch::jit::Module module;
  torch::Device device;
};

// forward(): scores of heads [Bh, K1] x relations [B] x tails [Bt, K2] (int64 ids on the
// module's device, Bh and Bt each B or 1, K1 or K2 1), broadcast to [B, max(K1, K2)].
// Autograd records the graph unless the caller disabled it.
torch::Tensor KgeForward(KgeModule& kge, const torch::Tensor& heads, const torch::Tensor& relations,
                         const torch::Tensor& tails);

}  // namespace grail

#endif  // GRAIL_MODEL_KGE_KGE_MODULE_H_
