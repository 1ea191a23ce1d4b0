// What the CPU and CUDA registrations of grail::rspmm share (model/ops/rspmm.cc,
// model/ops/rspmm_cuda_ops.cc): argument checks and the tensors-to-kernel plumbing.
#ifndef GRAIL_MODEL_OPS_RSPMM_INTERNAL_H_
#define GRAIL_MODEL_OPS_RSPMM_INTERNAL_H_

#include <ATen/core/Tensor.h>

#include <string>
#include <tuple>
#include <vector>

#include "model/ops/rspmm_kernel.h"

namespace grail::ops {

// One device's kernels.
struct RspmmKernels {
  void (*forward_float)(const RspmmForwardArgs<float>&);
  void (*forward_double)(const RspmmForwardArgs<double>&);
  void (*backward_float)(const RspmmBackwardArgs<float>&);
  void (*backward_double)(const RspmmBackwardArgs<double>&);
};

// Checks the arguments (throwing c10::Error naming the one at fault) and runs the kernels.
// One output per reduction of `reduce`, in its order. The backward takes the gradient of
// each output (an empty tensor for an output the loss does not use) and the outputs.
std::vector<at::Tensor> RspmmForwardWith(const RspmmKernels& kernels, const at::Tensor& h,
                                         const at::Tensor& w, const at::Tensor& init,
                                         const at::Tensor& ptr, const at::Tensor& edges,
                                         const at::Tensor& src_order, const std::string& reduce);
std::tuple<at::Tensor, at::Tensor, at::Tensor> RspmmBackwardWith(
    const RspmmKernels& kernels, at::TensorList grad, const at::Tensor& h, const at::Tensor& w,
    const at::Tensor& init, at::TensorList out, const at::Tensor& ptr, const at::Tensor& edges,
    const at::Tensor& src_order, const std::string& reduce);

}  // namespace grail::ops

#endif  // GRAIL_MODEL_OPS_RSPMM_INTERNAL_H_
