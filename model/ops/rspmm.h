// grail::rspmm — relational message passing fused into one operator, registered with
// TorchScript so that a path model's archive calls it (torch.ops.grail.rspmm) wherever the
// archive runs: the trainer, the evaluator, the server, and Python after
// torch.ops.load_library("libgrail_ops.so").
//
//   rspmm(h, w, init, ptr, edges, src_order, reduce) -> [out_1, ..., out_K]    each [V, F]
//
// For each edge (u, r, v) the message is m = h[u] * w[r] (rows of F values, elementwise), and
// out_k[v] reduces init[v] and the messages into v by the k-th reduction of `reduce`, a
// comma-separated list of distinct names from:
//   sum     init[v] + sum of m              sum_sq  init[v]^2 + sum of m^2
//   max     max(init[v], every m)           min     min(init[v], every m)
// (model/ops/rspmm_kernel.h). h: [V, F], w: [R, F], init: [V, F], float or double, on one
// device. w's rows may be query-dependent: with the batch's B queries folded into the
// features (F = B * d), w[r] holds relation r's vector for every query. Nothing per edge is
// materialised: the backward recomputes the messages, and its gradient of h needs no lock
// (it runs by source). Gradients flow to h, w and init; at a tie of max or min the gradient
// is shared evenly, as torch.scatter_reduce's is.
//
// The graph (ptr: int64 [2, V + 1], edges: int64 [3, E], src_order: int64 [E]) comes from
//   relational_graph(src, rel, dst, num_nodes) -> (ptr, edges, src_order)
// over any edge list: edges holds (src, rel, dst) sorted by destination (stable), ptr[0] the
// offsets of each destination's edges, ptr[1] of each source's in src_order. Build it once
// per graph and reuse it for every layer.
//
// Errors (c10::Error, a RuntimeError in Python) name the argument at fault: a shape, dtype or
// device mismatch, an index out of range, an unknown or repeated reduction.
#ifndef GRAIL_MODEL_OPS_RSPMM_H_
#define GRAIL_MODEL_OPS_RSPMM_H_

#include <ATen/core/Tensor.h>

#include <string>
#include <tuple>
#include <vector>

namespace grail::ops {

// Makes sure the operators (grail::rspmm, grail::relational_graph, grail::pna_moments and
// grail::pna_combine: pna_moments.h, pna_combine.h) are registered in this process: a statically
// linked binary keeps this library's registration only if something calls into it. Cheap; call
// before loading or building a module that uses them.
void LinkRelationalOps();

// The operators through the dispatcher (autograd included), for C++ callers.
std::vector<at::Tensor> Rspmm(const at::Tensor& h, const at::Tensor& w, const at::Tensor& init,
                              const at::Tensor& ptr, const at::Tensor& edges,
                              const at::Tensor& src_order, const std::string& reduce);
std::tuple<at::Tensor, at::Tensor, at::Tensor> RelationalGraph(const at::Tensor& src,
                                                               const at::Tensor& rel,
                                                               const at::Tensor& dst,
                                                               int64_t num_nodes);

}  // namespace grail::ops

#endif  // GRAIL_MODEL_OPS_RSPMM_H_
