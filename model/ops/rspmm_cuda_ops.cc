// The CUDA registration of grail::rspmm: built only against a LibTorch with CUDA (see
// model/ops/CMakeLists.txt), over the kernels of model/ops/rspmm_cuda.cu.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <string>
#include <tuple>
#include <vector>

#include "model/ops/rspmm_internal.h"
#include "model/ops/rspmm_kernel.h"

namespace grail::ops {
namespace {

void* CurrentStream() { return c10::cuda::getCurrentCUDAStream().stream(); }

template <typename T>
void Forward(const RspmmForwardArgs<T>& args) {
  const char* error = RspmmForwardCuda<T>(args, CurrentStream());
  TORCH_CHECK(error == nullptr, "rspmm: the CUDA kernel failed: ", error);
}

template <typename T>
void Backward(const RspmmBackwardArgs<T>& args) {
  const char* error = RspmmBackwardCuda<T>(args, CurrentStream());
  TORCH_CHECK(error == nullptr, "rspmm_backward: the CUDA kernel failed: ", error);
}

constexpr RspmmKernels kCudaKernels = {&Forward<float>, &Forward<double>, &Backward<float>,
                                       &Backward<double>};

std::vector<at::Tensor> RspmmCuda(const at::Tensor& h, const at::Tensor& w, const at::Tensor& init,
                                  const at::Tensor& ptr, const at::Tensor& edges,
                                  const at::Tensor& order, std::string reduce) {
  const c10::cuda::CUDAGuard guard(h.device());
  return RspmmForwardWith(kCudaKernels, h, w, init, ptr, edges, order, reduce);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> RspmmBackwardCudaOp(
    at::TensorList grad, const at::Tensor& h, const at::Tensor& w, const at::Tensor& init,
    at::TensorList out, const at::Tensor& ptr, const at::Tensor& edges, const at::Tensor& order,
    std::string reduce) {
  const c10::cuda::CUDAGuard guard(h.device());
  return RspmmBackwardWith(kCudaKernels, grad, h, w, init, out, ptr, edges, order, reduce);
}

}  // namespace

void LinkRelationalCudaOps() {}

}  // namespace grail::ops

TORCH_LIBRARY_IMPL(grail, CUDA, m) {
  m.impl("rspmm", &grail::ops::RspmmCuda);
  m.impl("rspmm_backward", &grail::ops::RspmmBackwardCudaOp);
}
