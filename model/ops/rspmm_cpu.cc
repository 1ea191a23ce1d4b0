// CPU kernels of grail::rspmm (model/ops/rspmm_kernel.h says what they compute).
//
// Forward: destination rows in ranges of about equal cost (edges + 1 per row), times blocks
// of columns, over at::parallel_for; each row's accumulators are its output rows, so a
// message is read, reduced into every output asked for and dropped. Backward: a first pass
// by destination computes init's gradient and, for max and min, the gradient divided by the
// tie count; a second pass by source recomputes each message and accumulates the source's
// gradient in its own row (one writer per row: no locks) and the relation's in a partial
// per partition of the work, summed at the end in a fixed order (deterministic for a given
// thread count). The inner loops run over contiguous columns and are vectorised; on x86-64
// each is compiled for AVX-512, AVX2 and the baseline, picked at load time.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "model/ops/cpu_clones.h"
#include "model/ops/rspmm_kernel.h"

// The rows a loop reads and writes never overlap; said so, the compiler vectorises loops
// with several outputs without alias checks.
#if defined(__clang__)
#define GRAIL_NO_ALIAS _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define GRAIL_NO_ALIAS _Pragma("GCC ivdep")
#else
#define GRAIL_NO_ALIAS
#endif

namespace grail::ops {
namespace {

constexpr int64_t kColumnBlock = 4096;  // columns per work item (wider rows are split)
constexpr int64_t kInnerBlock = 256;    // columns reduced together within a row
// The reductions a kernel computes: kMask when the kernel is specialised for them (the sum
// and all four, what the path model asks for: the branches fold away and the loops
// vectorise as written), else read from which outputs (forward) or gradients (backward) are
// given, for any other combination.
template <int kMask, typename T>
int MaskOf(const RspmmForwardArgs<T>& a) {
  return kMask != 0 ? kMask : GivenMask(a.out);
}
template <int kMask, typename T>
int MaskOf(const RspmmBackwardArgs<T>& a) {
  return kMask != 0 ? kMask : GivenMask(a.grad);
}

// Bounds of `parts` ranges of rows [0, V) of about equal cost ptr[v + 1] - ptr[v] + 1.
std::vector<int64_t> BalancedRowSplits(const int64_t* ptr, int64_t num_rows, int64_t parts) {
  std::vector<int64_t> bounds(parts + 1, num_rows);
  bounds[0] = 0;
  const int64_t total = ptr[num_rows] + num_rows;
  int64_t v = 0;
  for (int64_t c = 1; c < parts; ++c) {
    const int64_t target = total * c / parts;
    // First row whose cost prefix ptr[v] + v reaches the target (rows are scanned once).
    while (v < num_rows && ptr[v] + v < target) ++v;
    bounds[c] = v;
  }
  return bounds;
}

struct WorkItems {
  std::vector<int64_t> row_bounds;
  int64_t column_blocks = 1;
  int64_t count() const { return static_cast<int64_t>(row_bounds.size() - 1) * column_blocks; }
};

WorkItems SplitWork(const int64_t* ptr, int64_t num_rows, int64_t features) {
  WorkItems items;
  items.column_blocks = std::max<int64_t>(1, (features + kColumnBlock - 1) / kColumnBlock);
  const int64_t threads = std::max(1, at::get_num_threads());
  const int64_t row_parts =
      std::max<int64_t>(1, std::min<int64_t>(num_rows, 4 * threads / items.column_blocks + 1));
  items.row_bounds = BalancedRowSplits(ptr, num_rows, row_parts);
  return items;
}

template <typename Fn>
void ForEachItem(const WorkItems& items, int64_t features, Fn fn) {
  at::parallel_for(0, items.count(), 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t part = i / items.column_blocks, block = i % items.column_blocks;
      const int64_t c0 = block * kColumnBlock, c1 = std::min(features, c0 + kColumnBlock);
      fn(items.row_bounds[part], items.row_bounds[part + 1], c0, c1);
    }
  });
}

// ---- forward ----

template <typename T, int kMask>
GRAIL_VECTOR_CLONES void ForwardRows(const RspmmForwardArgs<T>& a, int64_t row_begin,
                                     int64_t row_end, int64_t c_begin, int64_t c_end) {
  const RelationalCsr& g = a.graph;
  const int64_t F = a.features;
  const int mask = MaskOf<kMask>(a);
  for (int64_t v = row_begin; v < row_end; ++v) {
    // Columns in blocks whose accumulators stay in L1; the row's source rows stay in L2
    // from one block to the next.
    for (int64_t c0 = c_begin; c0 < c_end; c0 += kInnerBlock) {
      const int64_t n = std::min(kInnerBlock, c_end - c0);
      const int64_t row = v * F + c0;
      const T* __restrict init = a.init + row;
      T* __restrict s = mask & kSumBit ? a.out[kSum] + row : nullptr;
      T* __restrict q = mask & kSumSqBit ? a.out[kSumSq] + row : nullptr;
      T* __restrict hi = mask & kMaxBit ? a.out[kMax] + row : nullptr;
      T* __restrict lo = mask & kMinBit ? a.out[kMin] + row : nullptr;
      GRAIL_NO_ALIAS
      for (int64_t f = 0; f < n; ++f) {
        if ((mask & kSumBit) != 0) s[f] = init[f];
        if ((mask & kSumSqBit) != 0) q[f] = init[f] * init[f];
        if ((mask & kMaxBit) != 0) hi[f] = init[f];
        if ((mask & kMinBit) != 0) lo[f] = init[f];
      }
      for (int64_t e = g.dst_ptr[v]; e < g.dst_ptr[v + 1]; ++e) {
        const T* __restrict hu = a.h + g.src[e] * F + c0;
        const T* __restrict wr = a.w + g.rel[e] * F + c0;
        GRAIL_NO_ALIAS
        for (int64_t f = 0; f < n; ++f) {
          const T m = hu[f] * wr[f];
          if ((mask & kSumBit) != 0) s[f] += m;
          if ((mask & kSumSqBit) != 0) q[f] += m * m;
          if ((mask & kMaxBit) != 0) hi[f] = m > hi[f] ? m : hi[f];
          if ((mask & kMinBit) != 0) lo[f] = m < lo[f] ? m : lo[f];
        }
      }
    }
  }
}

// ---- backward ----
//
// Two ways, by what memory allows. By destination (the default): one pass per row v reads
// v's gradients once, counts the ties of max and min, recomputes each message into v and
// adds its share into the source's and the relation's gradient, both partials of the
// thread's partition (summed at the end). By source (when P partials of h's gradient would
// exceed kPartialBudget): a pass by destination computes the tie shares, then a pass by
// source reads every message's destination rows again and writes each source's gradient
// once, with no partial of h's.

constexpr int64_t kPartialBudget = int64_t{256} << 20;  // bytes of partial gradients of h

// init's gradient for the columns [c0, c0 + n) of row v, and the max/min tie shares.
template <typename T, int kMask>
GRAIL_INLINE void RowTies(const RspmmBackwardArgs<T>& a, int64_t v, int64_t c0, int64_t n,
                          T* __restrict hi_share, T* __restrict lo_share) {
  const RelationalCsr& g = a.graph;
  const int mask = MaskOf<kMask>(a);
  const int64_t F = a.features, row = v * F + c0;
  const T* __restrict init = a.init + row;
  T* __restrict grad_init = a.grad_init + row;
  GRAIL_NO_ALIAS
  for (int64_t f = 0; f < n; ++f) {
    T gi = 0;
    if ((mask & kSumBit) != 0) gi += a.grad[kSum][row + f];
    if ((mask & kSumSqBit) != 0) gi += 2 * init[f] * a.grad[kSumSq][row + f];
    grad_init[f] = gi;
  }
  if ((mask & (kMaxBit | kMinBit)) != 0) {
    const T* __restrict hi = mask & kMaxBit ? a.out[kMax] + row : nullptr;
    const T* __restrict lo = mask & kMinBit ? a.out[kMin] + row : nullptr;
    GRAIL_NO_ALIAS
    for (int64_t f = 0; f < n; ++f) {
      if ((mask & kMaxBit) != 0) hi_share[f] = init[f] == hi[f] ? T(1) : T(0);
      if ((mask & kMinBit) != 0) lo_share[f] = init[f] == lo[f] ? T(1) : T(0);
    }
    for (int64_t e = g.dst_ptr[v]; e < g.dst_ptr[v + 1]; ++e) {
      const T* __restrict hu = a.h + g.src[e] * F + c0;
      const T* __restrict wr = a.w + g.rel[e] * F + c0;
      GRAIL_NO_ALIAS
      for (int64_t f = 0; f < n; ++f) {
        const T m = hu[f] * wr[f];
        if ((mask & kMaxBit) != 0) hi_share[f] += m == hi[f] ? T(1) : T(0);
        if ((mask & kMinBit) != 0) lo_share[f] += m == lo[f] ? T(1) : T(0);
      }
    }
    // The result is init or a message, so every count is at least 1.
    GRAIL_NO_ALIAS
    for (int64_t f = 0; f < n; ++f) {
      if ((mask & kMaxBit) != 0) {
        hi_share[f] = a.grad[kMax][row + f] / hi_share[f];
        grad_init[f] += (init[f] == hi[f] ? T(1) : T(0)) * hi_share[f];
      }
      if ((mask & kMinBit) != 0) {
        lo_share[f] = a.grad[kMin][row + f] / lo_share[f];
        grad_init[f] += (init[f] == lo[f] ? T(1) : T(0)) * lo_share[f];
      }
    }
  }
}

// d loss / d m for message m of column f into a row whose gradients and results are given.
template <typename T>
GRAIL_INLINE T MessageGradient(int mask, T m, int64_t f, const T* __restrict gs,
                               const T* __restrict gq, const T* __restrict hi,
                               const T* __restrict hi_share, const T* __restrict lo,
                               const T* __restrict lo_share) {
  T dm = 0;
  if ((mask & kSumBit) != 0) dm += gs[f];
  if ((mask & kSumSqBit) != 0) dm += 2 * m * gq[f];
  // Loads outside the conditions, so that the loop vectorises (a share is finite).
  if ((mask & kMaxBit) != 0) dm += (m == hi[f] ? T(1) : T(0)) * hi_share[f];
  if ((mask & kMinBit) != 0) dm += (m == lo[f] ? T(1) : T(0)) * lo_share[f];
  return dm;
}

template <typename T, int kMask>
GRAIL_VECTOR_CLONES void DestinationRows(const RspmmBackwardArgs<T>& a, T* grad_h, T* grad_w,
                                         int64_t row_begin, int64_t row_end, int64_t c_begin,
                                         int64_t c_end) {
  const RelationalCsr& g = a.graph;
  const int64_t F = a.features;
  const int mask = MaskOf<kMask>(a);
  T hi_share[kInnerBlock], lo_share[kInnerBlock];
  for (int64_t v = row_begin; v < row_end; ++v) {
    for (int64_t c0 = c_begin; c0 < c_end; c0 += kInnerBlock) {
      const int64_t n = std::min(kInnerBlock, c_end - c0), row = v * F + c0;
      RowTies<T, kMask>(a, v, c0, n, hi_share, lo_share);
      const T* gs = mask & kSumBit ? a.grad[kSum] + row : nullptr;
      const T* gq = mask & kSumSqBit ? a.grad[kSumSq] + row : nullptr;
      const T* hi = mask & kMaxBit ? a.out[kMax] + row : nullptr;
      const T* lo = mask & kMinBit ? a.out[kMin] + row : nullptr;
      for (int64_t e = g.dst_ptr[v]; e < g.dst_ptr[v + 1]; ++e) {
        const T* __restrict hu = a.h + g.src[e] * F + c0;
        const T* __restrict wr = a.w + g.rel[e] * F + c0;
        T* __restrict gh = grad_h + g.src[e] * F + c0;
        T* __restrict gw = grad_w + g.rel[e] * F + c0;
        GRAIL_NO_ALIAS
        for (int64_t f = 0; f < n; ++f) {
          const T m = hu[f] * wr[f];
          const T dm = MessageGradient<T>(mask, m, f, gs, gq, hi, hi_share, lo, lo_share);
          gh[f] += dm * wr[f];
          gw[f] += dm * hu[f];
        }
      }
    }
  }
}

template <typename T, int kMask>
GRAIL_VECTOR_CLONES void TieRows(const RspmmBackwardArgs<T>& a, int64_t row_begin, int64_t row_end,
                                 int64_t c_begin, int64_t c_end) {
  const int64_t F = a.features;
  const int mask = MaskOf<kMask>(a);
  for (int64_t v = row_begin; v < row_end; ++v) {
    for (int64_t c0 = c_begin; c0 < c_end; c0 += kInnerBlock) {
      const int64_t n = std::min(kInnerBlock, c_end - c0), row = v * F + c0;
      RowTies<T, kMask>(a, v, c0, n, mask & kMaxBit ? a.tie_share[kMax] + row : nullptr,
                        mask & kMinBit ? a.tie_share[kMin] + row : nullptr);
    }
  }
}

template <typename T, int kMask>
GRAIL_VECTOR_CLONES void SourceRows(const RspmmBackwardArgs<T>& a, T* grad_w, int64_t row_begin,
                                    int64_t row_end, int64_t c_begin, int64_t c_end) {
  const RelationalCsr& g = a.graph;
  const int64_t F = a.features;
  const int mask = MaskOf<kMask>(a);
  for (int64_t u = row_begin; u < row_end; ++u) {
    for (int64_t c0 = c_begin; c0 < c_end; c0 += kInnerBlock) {
      const int64_t n = std::min(kInnerBlock, c_end - c0);
      const T* __restrict hu = a.h + u * F + c0;
      T* __restrict gh = a.grad_h + u * F + c0;
      GRAIL_NO_ALIAS
      for (int64_t f = 0; f < n; ++f) gh[f] = 0;
      for (int64_t i = g.src_ptr[u]; i < g.src_ptr[u + 1]; ++i) {
        const int64_t e = g.src_order[i];
        const int64_t row = g.dst[e] * F + c0;
        const T* __restrict wr = a.w + g.rel[e] * F + c0;
        T* __restrict gw = grad_w + g.rel[e] * F + c0;
        const T* gs = mask & kSumBit ? a.grad[kSum] + row : nullptr;
        const T* gq = mask & kSumSqBit ? a.grad[kSumSq] + row : nullptr;
        const T* hi = mask & kMaxBit ? a.out[kMax] + row : nullptr;
        const T* hs = mask & kMaxBit ? a.tie_share[kMax] + row : nullptr;
        const T* lo = mask & kMinBit ? a.out[kMin] + row : nullptr;
        const T* ls = mask & kMinBit ? a.tie_share[kMin] + row : nullptr;
        GRAIL_NO_ALIAS
        for (int64_t f = 0; f < n; ++f) {
          const T m = hu[f] * wr[f];
          const T dm = MessageGradient<T>(mask, m, f, gs, gq, hi, hs, lo, ls);
          gh[f] += dm * wr[f];
          gw[f] += dm * hu[f];
        }
      }
    }
  }
}

template <typename T, int kMask>
void Forward(const RspmmForwardArgs<T>& a) {
  const WorkItems items = SplitWork(a.graph.dst_ptr, a.graph.num_nodes, a.features);
  ForEachItem(items, a.features, [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    ForwardRows<T, kMask>(a, r0, r1, c0, c1);
  });
}

// Sums `parts` partials of `size` values into `out` in a fixed order.
template <typename T>
void SumPartials(const T* partials, int64_t parts, int64_t size, T* out) {
  at::parallel_for(0, size, 4096, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      T sum = 0;
      for (int64_t p = 0; p < parts; ++p) sum += partials[p * size + i];
      out[i] = sum;
    }
  });
}

// Runs fn(p, first item, end item) for `parts` partitions of `items` work items, in parallel.
template <typename Fn>
void ForEachPartition(int64_t items, int64_t parts, Fn fn) {
  at::parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) fn(p, items * p / parts, items * (p + 1) / parts);
  });
}

template <typename T, int kMask>
void Backward(const RspmmBackwardArgs<T>& a) {
  const int64_t V = a.graph.num_nodes, F = a.features, R = a.num_relations;
  const int64_t threads = std::max(1, at::get_num_threads());
  // By destination pays off when a message's gradient reads several rows of its destination
  // (max and min: the result and the share); a sum's reads one.
  const bool by_destination =
      (MaskOf<kMask>(a) & (kMaxBit | kMinBit)) != 0 &&
      (threads == 1 || threads * V * F * static_cast<int64_t>(sizeof(T)) <= kPartialBudget);
  const WorkItems work = SplitWork(by_destination ? a.graph.dst_ptr : a.graph.src_ptr, V, F);
  const int64_t items = work.count();
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(threads, items));
  // Partials of grad_w, and by destination of grad_h; one partition writes straight out.
  std::vector<T> partial_w(parts > 1 ? static_cast<size_t>(parts * R * F) : 0);
  std::vector<T> partial_h(parts > 1 && by_destination ? static_cast<size_t>(parts * V * F) : 0);
  std::vector<T> shares;
  RspmmBackwardArgs<T> with_shares = a;
  if (!by_destination) {
    shares.resize(static_cast<size_t>(2 * V * F));
    with_shares.tie_share[kMax] = shares.data();
    with_shares.tie_share[kMin] = shares.data() + V * F;
    ForEachItem(SplitWork(a.graph.dst_ptr, V, F), F,
                [&](int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
                  TieRows<T, kMask>(with_shares, r0, r1, c0, c1);
                });
  }
  ForEachPartition(items, parts, [&](int64_t p, int64_t i0, int64_t i1) {
    T* gw = parts > 1 ? partial_w.data() + p * R * F : a.grad_w;
    std::fill(gw, gw + R * F, T(0));
    T* gh = a.grad_h;
    if (by_destination) {
      gh = parts > 1 ? partial_h.data() + p * V * F : a.grad_h;
      std::fill(gh, gh + V * F, T(0));
    }
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t part = i / work.column_blocks, block = i % work.column_blocks;
      const int64_t c0 = block * kColumnBlock, c1 = std::min(F, c0 + kColumnBlock);
      const int64_t r0 = work.row_bounds[part], r1 = work.row_bounds[part + 1];
      if (by_destination) {
        DestinationRows<T, kMask>(a, gh, gw, r0, r1, c0, c1);
      } else {
        SourceRows<T, kMask>(with_shares, gw, r0, r1, c0, c1);
      }
    }
  });
  if (parts > 1) {
    SumPartials(partial_w.data(), parts, R * F, a.grad_w);
    if (by_destination) SumPartials(partial_h.data(), parts, V * F, a.grad_h);
  }
}

// Calls fn(std::integral_constant<int, M>) with M the mask when a kernel is specialised for
// it (sum; all four), 0 (read at run time) otherwise.
template <typename Fn>
void WithMask(int mask, Fn fn) {
  constexpr int kAll = kSumBit | kSumSqBit | kMaxBit | kMinBit;
  if (mask == kSumBit) {
    fn(std::integral_constant<int, kSumBit>{});
  } else if (mask == kAll) {
    fn(std::integral_constant<int, kAll>{});
  } else {
    fn(std::integral_constant<int, 0>{});
  }
}

}  // namespace

template <typename T>
void RspmmForwardCpu(const RspmmForwardArgs<T>& args) {
  WithMask(MaskOf<0>(args), [&](auto mask) { Forward<T, decltype(mask)::value>(args); });
}

template <typename T>
void RspmmBackwardCpu(const RspmmBackwardArgs<T>& args) {
  WithMask(MaskOf<0>(args), [&](auto m) { Backward<T, decltype(m)::value>(args); });
}

template void RspmmForwardCpu<float>(const RspmmForwardArgs<float>&);
template void RspmmForwardCpu<double>(const RspmmForwardArgs<double>&);
template void RspmmBackwardCpu<float>(const RspmmBackwardArgs<float>&);
template void RspmmBackwardCpu<double>(const RspmmBackwardArgs<double>&);

void BuildRelationalCsr(int64_t num_nodes, int64_t num_edges, const int64_t* src,
                        const int64_t* rel, const int64_t* dst, int64_t* edges, int64_t* dst_ptr,
                        int64_t* src_ptr, int64_t* src_order) {
  const int64_t V = num_nodes, E = num_edges;
  std::fill(dst_ptr, dst_ptr + V + 1, 0);
  std::fill(src_ptr, src_ptr + V + 1, 0);
  for (int64_t e = 0; e < E; ++e) {
    ++dst_ptr[dst[e] + 1];
    ++src_ptr[src[e] + 1];
  }
  for (int64_t v = 0; v < V; ++v) {
    dst_ptr[v + 1] += dst_ptr[v];
    src_ptr[v + 1] += src_ptr[v];
  }
  int64_t* out_src = edges;
  int64_t* out_rel = edges + E;
  int64_t* out_dst = edges + 2 * E;
  std::vector<int64_t> next(dst_ptr, dst_ptr + V);
  for (int64_t e = 0; e < E; ++e) {
    const int64_t at = next[dst[e]]++;
    out_src[at] = src[e];
    out_rel[at] = rel[e];
    out_dst[at] = dst[e];
  }
  next.assign(src_ptr, src_ptr + V);
  for (int64_t e = 0; e < E; ++e) src_order[next[out_src[e]]++] = e;
}

}  // namespace grail::ops
