// grail::pna_combine — PNA's combine step: one product of each node's aggregated features with
// the layer's weights, blocks of its result scaled per node and summed, and the bias:
//
//   pna_combine(parts, weight, scale, bias) -> out                          [N, D]
//
//   X = [parts_1, ..., parts_P]   (each [N, d]: X is [N, P d], never materialised)
//   out[n] = sum over s < S of scale[n / G, s] * (X[n] weight)[s D : (s + 1) D] + bias
//
// weight: [P d, S D]; scale: [V, S] with N = V G (row n belongs to node n / G: the path model's
// states hold G columns of d values per node, viewed as V G rows); bias: [D]. All float or
// double, on one device. In the path model P = 5 (mean, max, min, std, the state), S = 3 (PNA's
// scalers 1, s, 1 / s) and D = d.
//
// The same values as the script it replaces, `(torch.matmul(torch.cat(parts, 1), weight)
// .view(V, G, S, D) * scale.view(V, 1, S, 1)).sum(2).view(-1, D) + bias`: on the CPU the
// product runs over blocks of rows, each block's rows computed as one product computes them
// (with Debian's OpenBLAS, out and the parts' gradients are the script's to the bit), and the
// gradients of weight, scale and bias sum over the rows in another order (within float
// rounding). X, its product and the scaled blocks exist for one block of rows at a time, in
// cache: at fb237_v4's batch of 64 (N = 301k rows) it runs 3.4x faster forward and 1.2-1.9x
// backward than the script, and keeps none of the [N, P d] and [N, S D] tensors the script
// keeps or makes (docs/BENCHMARKS-log.md, "PNA's combine fused"). Gradients flow to every input;
// the backward recomputes X and, for scale's gradient only, the product. On other devices,
// the script's operators.
#ifndef GRAIL_MODEL_OPS_PNA_COMBINE_H_
#define GRAIL_MODEL_OPS_PNA_COMBINE_H_

#include <ATen/core/Tensor.h>

#include <vector>

namespace grail::ops {

// Through the dispatcher (autograd included), for C++ callers.
at::Tensor PnaCombine(const std::vector<at::Tensor>& parts, const at::Tensor& weight,
                      const at::Tensor& scale, const at::Tensor& bias);

}  // namespace grail::ops

#endif  // GRAIL_MODEL_OPS_PNA_COMBINE_H_
