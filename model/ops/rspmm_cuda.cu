// CUDA kernels of grail::rspmm (model/ops/rspmm_kernel.h says what they compute). Plain CUDA,
// no LibTorch: model/ops/rspmm_cuda_ops.cc registers them.
//
// One thread per (row, column): consecutive threads take consecutive columns of a row, so
// every read of a state or relation row is coalesced and a warp reads each edge's indices
// once. Forward and the backward's first pass run by destination and write their rows
// without atomics; the second pass runs by source, so the gradient of h is accumulated in a
// register per (source, column) and written once; only the relations' gradient is
// accumulated atomically.
#include <cuda_runtime.h>

#include <cstdint>

#include "model/ops/rspmm_kernel.h"

namespace grail::ops {
namespace {

constexpr int kThreads = 256;
// The graph is checked on the host once (model/ops/rspmm.cc); the kernels skip an index out
// of range besides, so no graph, however changed since, reads or writes outside the tensors.
__device__ bool InRange(int64_t x, int64_t n) {
  return static_cast<uint64_t>(x) < static_cast<uint64_t>(n);
}

// Row v's edges [begin, end), clamped to [0, E).
__device__ void RowEdges(const int64_t* ptr, int64_t v, int64_t num_edges, int64_t* begin,
                         int64_t* end) {
  const int64_t b = ptr[v], e = ptr[v + 1];
  *begin = b < 0 ? 0 : (b > num_edges ? num_edges : b);
  *end = e < *begin ? *begin : (e > num_edges ? num_edges : e);
}

__host__ int64_t Blocks(int64_t work) {
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  return blocks < 1 ? 1 : (blocks > (int64_t{1} << 30) ? (int64_t{1} << 30) : blocks);
}

template <typename T, int kMask>
__global__ void ForwardKernel(RspmmForwardArgs<T> a) {
  const RelationalCsr g = a.graph;
  const int64_t F = a.features, cells = g.num_nodes * F;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < cells;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t v = i / F, f = i - v * F;
    const T x = a.init[i];
    T s = x, q = x * x, hi = x, lo = x;
    int64_t begin, end;
    RowEdges(g.dst_ptr, v, g.num_edges, &begin, &end);
    for (int64_t e = begin; e < end; ++e) {
      if (!InRange(g.src[e], g.num_nodes) || !InRange(g.rel[e], a.num_relations)) continue;
      const T m = a.h[g.src[e] * F + f] * a.w[g.rel[e] * F + f];
      if constexpr ((kMask & kSumBit) != 0) s += m;
      if constexpr ((kMask & kSumSqBit) != 0) q += m * m;
      if constexpr ((kMask & kMaxBit) != 0) hi = m > hi ? m : hi;
      if constexpr ((kMask & kMinBit) != 0) lo = m < lo ? m : lo;
    }
    if constexpr ((kMask & kSumBit) != 0) a.out[kSum][i] = s;
    if constexpr ((kMask & kSumSqBit) != 0) a.out[kSumSq][i] = q;
    if constexpr ((kMask & kMaxBit) != 0) a.out[kMax][i] = hi;
    if constexpr ((kMask & kMinBit) != 0) a.out[kMin][i] = lo;
  }
}

template <typename T, int kMask>
__global__ void TieKernel(RspmmBackwardArgs<T> a) {
  const RelationalCsr g = a.graph;
  const int64_t F = a.features, cells = g.num_nodes * F;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < cells;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t v = i / F, f = i - v * F;
    const T x = a.init[i];
    T grad_init = 0;
    if constexpr ((kMask & kSumBit) != 0) grad_init += a.grad[kSum][i];
    if constexpr ((kMask & kSumSqBit) != 0) grad_init += 2 * x * a.grad[kSumSq][i];
#pragma unroll
    for (int k = kMax; k <= kMin; ++k) {
      if ((kMask & (1 << k)) == 0) continue;
      const T out = a.out[k][i];
      T count = x == out ? T(1) : T(0);
      int64_t begin, end;
      RowEdges(g.dst_ptr, v, g.num_edges, &begin, &end);
      for (int64_t e = begin; e < end; ++e) {
        if (!InRange(g.src[e], g.num_nodes) || !InRange(g.rel[e], a.num_relations)) continue;
        count += a.h[g.src[e] * F + f] * a.w[g.rel[e] * F + f] == out ? T(1) : T(0);
      }
      const T share = a.grad[k][i] / count;  // out is init or a message: count >= 1
      a.tie_share[k][i] = share;
      grad_init += x == out ? share : T(0);
    }
    a.grad_init[i] = grad_init;
  }
}

template <typename T, int kMask>
__global__ void SourceKernel(RspmmBackwardArgs<T> a) {
  const RelationalCsr g = a.graph;
  const int64_t F = a.features, cells = g.num_nodes * F;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < cells;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t u = i / F, f = i - u * F;
    const T hu = a.h[i];
    T gh = 0;
    int64_t begin, end;
    RowEdges(g.src_ptr, u, g.num_edges, &begin, &end);
    for (int64_t k = begin; k < end; ++k) {
      const int64_t e = g.src_order[k];
      if (!InRange(e, g.num_edges) || !InRange(g.dst[e], g.num_nodes) ||
          !InRange(g.rel[e], a.num_relations)) {
        continue;
      }
      const int64_t at = g.dst[e] * F + f, wat = g.rel[e] * F + f;
      const T wr = a.w[wat];
      const T m = hu * wr;
      T dm = 0;
      if constexpr ((kMask & kSumBit) != 0) dm += a.grad[kSum][at];
      if constexpr ((kMask & kSumSqBit) != 0) dm += 2 * m * a.grad[kSumSq][at];
      if constexpr ((kMask & kMaxBit) != 0)
        dm += m == a.out[kMax][at] ? a.tie_share[kMax][at] : T(0);
      if constexpr ((kMask & kMinBit) != 0)
        dm += m == a.out[kMin][at] ? a.tie_share[kMin][at] : T(0);
      gh += dm * wr;
      atomicAdd(a.grad_w + wat, dm * hu);
    }
    a.grad_h[i] = gh;
  }
}

template <typename Fn>
void WithMask(int mask, Fn fn) {
  switch (mask) {
#define GRAIL_MASK_CASE(m)                \
  case m:                                 \
    fn(std::integral_constant<int, m>{}); \
    break;
    GRAIL_MASK_CASE(1)
    GRAIL_MASK_CASE(2)
    GRAIL_MASK_CASE(3)
    GRAIL_MASK_CASE(4)
    GRAIL_MASK_CASE(5)
    GRAIL_MASK_CASE(6)
    GRAIL_MASK_CASE(7)
    GRAIL_MASK_CASE(8)
    GRAIL_MASK_CASE(9)
    GRAIL_MASK_CASE(10)
    GRAIL_MASK_CASE(11)
    GRAIL_MASK_CASE(12)
    GRAIL_MASK_CASE(13)
    GRAIL_MASK_CASE(14)
    GRAIL_MASK_CASE(15)
#undef GRAIL_MASK_CASE
    default:
      break;
  }
}

const char* LastError() {
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? nullptr : cudaGetErrorString(error);
}

}  // namespace

template <typename T>
const char* RspmmForwardCuda(const RspmmForwardArgs<T>& args, void* stream) {
  const int mask = GivenMask(args.out);
  const int64_t cells = args.graph.num_nodes * args.features;
  if (cells == 0) return nullptr;
  const auto s = static_cast<cudaStream_t>(stream);
  WithMask(mask, [&](auto m) {
    ForwardKernel<T, decltype(m)::value><<<Blocks(cells), kThreads, 0, s>>>(args);
  });
  return LastError();
}

template <typename T>
const char* RspmmBackwardCuda(const RspmmBackwardArgs<T>& args, void* stream) {
  const int mask = GivenMask(args.grad);
  const int64_t cells = args.graph.num_nodes * args.features;
  if (cells == 0) return nullptr;
  const auto s = static_cast<cudaStream_t>(stream);
  WithMask(mask, [&](auto m) {
    TieKernel<T, decltype(m)::value><<<Blocks(cells), kThreads, 0, s>>>(args);
    SourceKernel<T, decltype(m)::value><<<Blocks(cells), kThreads, 0, s>>>(args);
  });
  return LastError();
}

template const char* RspmmForwardCuda<float>(const RspmmForwardArgs<float>&, void*);
template const char* RspmmForwardCuda<double>(const RspmmForwardArgs<double>&, void*);
template const char* RspmmBackwardCuda<float>(const RspmmBackwardArgs<float>&, void*);
template const char* RspmmBackwardCuda<double>(const RspmmBackwardArgs<double>&, void*);

}  // namespace grail::ops
