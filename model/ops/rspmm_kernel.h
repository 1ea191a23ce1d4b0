// The kernels behind grail::rspmm (model/ops/rspmm.h), on raw arrays: no LibTorch here, so
// the CUDA file compiles with nvcc alone.
//
// A relational graph of V nodes and E edges (u, r, v) in two orders:
//   by destination: the edges themselves, sorted by v; the edges into v are
//                   [dst_ptr[v], dst_ptr[v + 1]), with src[e], rel[e], dst[e];
//   by source:      src_order lists the edge ids sorted by u; the edges out of u are
//                   src_order[src_ptr[u] .. src_ptr[u + 1]).
// Node states are rows of F values (h: V x F), relation vectors rows of F too (w: R x F).
// For each reduction asked for, with m_e = h[src[e]] * w[rel[e]] (elementwise):
//   sum     out[v] = init[v] + sum_e m_e
//   sum_sq  out[v] = init[v]^2 + sum_e m_e^2
//   max     out[v] = max(init[v], max_e m_e)        (init[v] when v has no edge)
//   min     out[v] = min(init[v], min_e m_e)
// The backward recomputes every m_e; at a tie of max or min the gradient is shared evenly by
// init and every message equal to the result, as torch.scatter_reduce's is.
#ifndef GRAIL_MODEL_OPS_RSPMM_KERNEL_H_
#define GRAIL_MODEL_OPS_RSPMM_KERNEL_H_

#include <cstdint>

namespace grail::ops {

// The reductions, as bits of a mask and as indices into RspmmOutputs' arrays.
enum Reduction : int { kSum = 0, kSumSq = 1, kMax = 2, kMin = 3, kNumReductions = 4 };
constexpr int kSumBit = 1 << kSum, kSumSqBit = 1 << kSumSq, kMaxBit = 1 << kMax,
              kMinBit = 1 << kMin;

// The reductions whose arrays are given (not null), as a mask of the bits above: the outputs
// of a forward, the gradients of a backward.
template <typename P>
constexpr int GivenMask(P* const (&given)[kNumReductions]) {
  int mask = 0;
  for (int k = 0; k < kNumReductions; ++k) mask |= given[k] != nullptr ? 1 << k : 0;
  return mask;
}

struct RelationalCsr {
  int64_t num_nodes = 0;
  int64_t num_edges = 0;
  const int64_t* dst_ptr = nullptr;    // V + 1
  const int64_t* src_ptr = nullptr;    // V + 1
  const int64_t* src = nullptr;        // E, by destination
  const int64_t* rel = nullptr;        // E
  const int64_t* dst = nullptr;        // E
  const int64_t* src_order = nullptr;  // E: edge ids by source
};

template <typename T>
struct RspmmForwardArgs {
  RelationalCsr graph;
  int64_t num_relations = 0;  // R
  int64_t features = 0;       // F
  const T* h = nullptr;
  const T* w = nullptr;
  const T* init = nullptr;
  T* out[kNumReductions] = {};  // V x F each; null: not asked for
};

template <typename T>
struct RspmmBackwardArgs {
  RelationalCsr graph;
  int64_t num_relations = 0;  // R
  int64_t features = 0;
  const T* h = nullptr;
  const T* w = nullptr;
  const T* init = nullptr;
  const T* out[kNumReductions] = {};   // the forward's results (max and min are read)
  const T* grad[kNumReductions] = {};  // d loss / d out; null: not asked for
  T* grad_h = nullptr;                 // V x F, written
  T* grad_w = nullptr;                 // R x F, written
  T* grad_init = nullptr;              // V x F, written
  // CUDA only (the CPU kernels hold their own): scratch of V x F per max and min asked for,
  // their gradient divided by the tie count.
  T* tie_share[kNumReductions] = {};
};

// CPU, over LibTorch's intra-op thread pool (at::parallel_for). Both write every element of
// their outputs.
template <typename T>
void RspmmForwardCpu(const RspmmForwardArgs<T>& args);
template <typename T>
void RspmmBackwardCpu(const RspmmBackwardArgs<T>& args);

// Counting sort of E edges (u, r, v) given as three arrays into the two orders above:
// `edges` receives src, rel and dst rows (3 x E, by destination, stable), dst_ptr and src_ptr
// V + 1 entries, src_order E. Indices must already lie in [0, V).
void BuildRelationalCsr(int64_t num_nodes, int64_t num_edges, const int64_t* src,
                        const int64_t* rel, const int64_t* dst, int64_t* edges, int64_t* dst_ptr,
                        int64_t* src_ptr, int64_t* src_order);

#ifdef GRAIL_WITH_CUDA
// CUDA, on `stream` (a cudaStream_t); every array on the device. The backward's scratch is as
// the CPU's; grad_w must be zeroed by the caller (it is accumulated atomically). They return
// null, or CUDA's message for a launch that failed.
template <typename T>
const char* RspmmForwardCuda(const RspmmForwardArgs<T>& args, void* stream);
template <typename T>
const char* RspmmBackwardCuda(const RspmmBackwardArgs<T>& args, void* stream);
#endif

}  // namespace grail::ops

#endif  // GRAIL_MODEL_OPS_RSPMM_KERNEL_H_
