// What the CPU and CUDA registrations of grail::rspmm share (model/ops/rspmm.cc,
// model/ops/rspmm_cuda_ops.cc): argument checks and the tensors-to-kernel plumbing.
#ifndef GRAIL_MODEL_OPS_RSPMM_INTERNAL_H_
#define GRAIL_MODEL_OPS_RSPMM_INTERNAL_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <deque>
#include <mutex>
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

// Graphs already checked, while their three tensors live unchanged (the same storage,
// offset, size and version counter), for the devices where a check waits for the device.
// A graph changed where no version counts it (through `.data`, or in place in inference mode)
// is not checked again: the CUDA kernels skip any index out of range besides, so such a graph
// gives wrong sums but never reads or writes outside the tensors.
// `num_relations` bounds the graph's relations: a graph in range for R relations is in range
// for any w of at least R rows.
class CheckedGraphs {
 public:
  bool Contains(const at::Tensor& ptr, const at::Tensor& edges, const at::Tensor& src_order,
                int64_t num_nodes, int64_t num_relations) const;
  void Add(const at::Tensor& ptr, const at::Tensor& edges, const at::Tensor& src_order,
           int64_t num_nodes, int64_t num_relations);

 private:
  static constexpr size_t kRecent = 4;  // a few graphs in turn (a step's, validation's)
  struct Stamp {
    explicit Stamp(const at::Tensor& t);
    bool Matches(const at::Tensor& t) const;
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    int64_t offset = 0, numel = 0, version = 0;
  };
  struct Graph {
    Stamp ptr, edges, order;
    c10::Device device;
    int64_t num_nodes, num_relations;
  };
  mutable std::mutex mu_;
  std::deque<Graph> recent_;  // newest first
};

// The process's checked graphs: rspmm's checks read and add to it, and relational_graph adds
// each graph it builds (from edge lists it has checked), so a step's new graph costs the
// device one wait, not a dozen.
CheckedGraphs& CheckedDeviceGraphs();

}  // namespace grail::ops

#endif  // GRAIL_MODEL_OPS_RSPMM_INTERNAL_H_
