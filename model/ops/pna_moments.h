// grail::pna_moments — PNA's mean and standard deviation of each node's messages, from
// grail::rspmm's "sum" and "sum_sq" outputs, in one pass forward and one backward:
//
//   pna_moments(sum, sum_sq, count) -> [mean, std]                          each [V, F]
//
//   mean = sum / count        std = sqrt(max(sum_sq / count - mean^2, 1e-6))
//
// sum, sum_sq: [V, F], float or double; count: [V, 1], the messages of each node (its row
// scales every column). The same values as those six elementwise operators in TorchScript
// (each rounded as they round it) and the same gradients (the same terms added in autograd's
// order), without their five intermediate [V, F] tensors and the dozen passes of their
// backward: 13% of the peak memory of an fb237_v4 training step at batch 64 and 5-7% of its
// CPU time (docs/BENCHMARKS-log.md, "PNA's moments fused"). Gradients flow to sum and sum_sq
// (none to count); where the variance is clamped, none flows through std, as through
// torch.clamp. On the CPU the fused kernels run; on other devices, those six operators.
#ifndef GRAIL_MODEL_OPS_PNA_MOMENTS_H_
#define GRAIL_MODEL_OPS_PNA_MOMENTS_H_

#include <ATen/core/Tensor.h>

#include <vector>

namespace grail::ops {

// The variance PNA's std never falls below (its square root, 1e-3, is the smallest std).
inline constexpr double kPnaMinVariance = 1e-6;

// Through the dispatcher (autograd included), for C++ callers.
std::vector<at::Tensor> PnaMoments(const at::Tensor& sum, const at::Tensor& sum_sq,
                                   const at::Tensor& count);

}  // namespace grail::ops

#endif  // GRAIL_MODEL_OPS_PNA_MOMENTS_H_
