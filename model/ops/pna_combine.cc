// grail::pna_combine: schema, checks, the CPU kernels and autograd (pna_combine.h).
//
// The CPU kernels split the N rows into blocks (whole nodes, so that a node's scale gradient
// is one block's), and the blocks into one range per thread. Per block: the block's X is
// gathered from the parts into a buffer of the thread, multiplied by the weight (LibTorch's
// matrix product, single-threaded inside the parallel loop), and its product scaled and summed
// into out. The backward makes the block's gradient of the product (scale times out's), multiplies
// it by the weight's transpose into the parts' gradients, and accumulates X's transpose times it
// into the thread's partial of the weight's gradient; the partials are summed at the end in a
// fixed order (deterministic for a given thread count).
#include "model/ops/pna_combine.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "model/ops/cpu_clones.h"

namespace grail::ops {
namespace {

struct CombineShape {
  int64_t rows = 0;        // N
  int64_t part_width = 0;  // d
  int64_t parts = 0;       // P
  int64_t scalers = 0;     // S
  int64_t width = 0;       // D, out's columns
  int64_t nodes = 0;       // V
  int64_t group = 1;       // G = N / V, rows per node
};

CombineShape CheckCombine(at::TensorList parts, const at::Tensor& weight, const at::Tensor& scale,
                          const at::Tensor& bias) {
  TORCH_CHECK(!parts.empty(), "pna_combine: parts must hold at least one tensor");
  const at::Tensor& first = parts[0];
  TORCH_CHECK(first.dim() == 2, "pna_combine: parts[0] must be [N, d], got ", first.sizes());
  TORCH_CHECK(first.scalar_type() == at::kFloat || first.scalar_type() == at::kDouble,
              "pna_combine: parts must be float or double, got ", first.scalar_type());
  for (size_t p = 1; p < parts.size(); ++p) {
    TORCH_CHECK(parts[p].sizes() == first.sizes(), "pna_combine: parts[", p,
                "] must have parts[0]'s shape ", first.sizes(), ", got ", parts[p].sizes());
  }
  CombineShape s;
  s.rows = first.size(0);
  s.part_width = first.size(1);
  s.parts = static_cast<int64_t>(parts.size());
  TORCH_CHECK(scale.dim() == 2 && scale.size(1) >= 1,
              "pna_combine: scale must be [V, S] with S >= 1, got ", scale.sizes());
  s.nodes = scale.size(0);
  s.scalers = scale.size(1);
  TORCH_CHECK((s.nodes == 0 && s.rows == 0) || (s.nodes > 0 && s.rows % s.nodes == 0),
              "pna_combine: the parts' ", s.rows, " rows must be a multiple of scale's ", s.nodes,
              " nodes");
  s.group = s.nodes > 0 ? s.rows / s.nodes : 1;
  TORCH_CHECK(weight.dim() == 2 && weight.size(0) == s.parts * s.part_width &&
                  weight.size(1) % s.scalers == 0,
              "pna_combine: weight must be [P d, S D] for P = ", s.parts,
              " parts of d = ", s.part_width, " and S = ", s.scalers, ", got ", weight.sizes());
  s.width = weight.size(1) / s.scalers;
  if (bias.defined()) {
    TORCH_CHECK(bias.dim() == 1 && bias.size(0) == s.width,
                "pna_combine: bias must be [D] for D = ", s.width, ", got ", bias.sizes());
  }
  for (const at::Tensor& t : {weight, scale, bias.defined() ? bias : weight}) {
    TORCH_CHECK(t.scalar_type() == first.scalar_type(),
                "pna_combine: weight, scale and bias must have the parts' dtype ",
                first.scalar_type(), ", got ", t.scalar_type());
    TORCH_CHECK(t.device() == first.device(), "pna_combine: every tensor must be on the parts' ",
                first.device(), ", got one on ", t.device());
  }
  for (const at::Tensor& p : parts) {
    TORCH_CHECK(p.scalar_type() == first.scalar_type() && p.device() == first.device(),
                "pna_combine: the parts must share a dtype and a device, got ", p.scalar_type(),
                " on ", p.device(), " and ", first.scalar_type(), " on ", first.device());
  }
  return s;
}

// The script's formulation: every device but the CPU, and the reference of the tests.
at::Tensor CombineByScript(at::TensorList parts, const at::Tensor& weight, const at::Tensor& scale,
                           const at::Tensor& bias, const CombineShape& s) {
  return (at::matmul(at::cat(parts, 1), weight).view({s.nodes, s.group, s.scalers, s.width}) *
          scale.view({s.nodes, 1, s.scalers, 1}))
             .sum(2)
             .view({-1, s.width}) +
         bias;
}

// Values per block of rows, X's and its product's together: a few of a core's L2 of 1-2 MB.
// A block of the path model's rows (P d = 5 x 32, S D = 3 x 32) is 2,048 rows; measured
// against blocks of 512 to 8,192 rows in docs/BENCHMARKS-log.md ("PNA's combine fused").
constexpr int64_t kBlockValues = int64_t{512} << 10;

// The blocks of whole nodes and their split into one range per thread.
struct Blocks {
  int64_t nodes_per_block = 1;
  int64_t count = 0;
  int64_t ranges = 1;
  int64_t begin(int64_t range) const { return count * range / ranges; }
};

Blocks SplitBlocks(const CombineShape& s) {
  Blocks b;
  const int64_t row_values = s.parts * s.part_width + s.scalers * s.width;
  const int64_t rows = std::max<int64_t>(1, kBlockValues / std::max<int64_t>(1, row_values));
  b.nodes_per_block = std::max<int64_t>(1, rows / s.group);
  b.count = (s.nodes + b.nodes_per_block - 1) / b.nodes_per_block;
  b.ranges = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), b.count));
  return b;
}

// A block: nodes [node, node + nodes), its rows [row, row + rows).
struct Block {
  int64_t node = 0, nodes = 0, row = 0, rows = 0;
};

Block BlockAt(const CombineShape& s, const Blocks& b, int64_t i) {
  Block k;
  k.node = i * b.nodes_per_block;
  k.nodes = std::min(b.nodes_per_block, s.nodes - k.node);
  k.row = k.node * s.group;
  k.rows = k.nodes * s.group;
  return k;
}

// Runs fn(range, block) for every block, each range on one thread, its blocks in order. The
// products there are below autograd (its mode is per thread, and LibTorch's pool threads have
// it on): this Function's backward is the gradient.
template <typename Fn>
void ForEachBlock(const CombineShape& s, const Blocks& b, Fn fn) {
  at::parallel_for(0, b.ranges, 1, [&](int64_t r0, int64_t r1) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t i = b.begin(r); i < b.begin(r + 1); ++i) fn(r, BlockAt(s, b, i));
    }
  });
}

// x[k] = [parts_1[n], ..., parts_P[n]] for the block's rows n = row + k.
template <typename T>
void GatherRows(const std::vector<const T*>& parts, int64_t d, const Block& k, T* x) {
  const int64_t P = static_cast<int64_t>(parts.size());
  for (int64_t r = 0; r < k.rows; ++r) {
    for (int64_t p = 0; p < P; ++p) {
      std::memcpy(x + (r * P + p) * d, parts[p] + (k.row + r) * d, d * sizeof(T));
    }
  }
}

// The reverse: grad_parts_p[n] = gx[k][p d : (p + 1) d].
template <typename T>
void ScatterRows(const T* gx, int64_t d, const Block& k, const std::vector<T*>& grad_parts) {
  const int64_t P = static_cast<int64_t>(grad_parts.size());
  for (int64_t r = 0; r < k.rows; ++r) {
    for (int64_t p = 0; p < P; ++p) {
      std::memcpy(grad_parts[p] + (k.row + r) * d, gx + (r * P + p) * d, d * sizeof(T));
    }
  }
}

// out[n] = sum_s scale[v, s] y[k][s D : (s + 1) D] + bias, the terms added in s's order from
// the first product, as the script's product and sum round them (the file is built without
// contracting a * b + c into an FMA: model/ops/CMakeLists.txt).
template <typename T>
GRAIL_VECTOR_CLONES void ScaleRows(const T* __restrict y, const T* __restrict scale,
                                   const T* __restrict bias, const CombineShape& s, const Block& k,
                                   T* __restrict out) {
  const int64_t S = s.scalers, D = s.width;
  for (int64_t r = 0; r < k.rows; ++r) {
    const T* c = scale + ((k.row + r) / s.group) * S;
    const T* yr = y + r * S * D;
    T* o = out + (k.row + r) * D;
    for (int64_t j = 0; j < D; ++j) {
      T acc = c[0] * yr[j];
      for (int64_t q = 1; q < S; ++q) acc = acc + c[q] * yr[q * D + j];
      o[j] = acc + bias[j];
    }
  }
}

// gy[k][s D + j] = scale[v, s] grad_out[n, j] (the product's gradient), and grad_out's column
// sums added to grad_bias.
template <typename T>
GRAIL_VECTOR_CLONES void ProductGradientRows(const T* __restrict grad_out,
                                             const T* __restrict scale, const CombineShape& s,
                                             const Block& k, T* __restrict gy,
                                             T* __restrict grad_bias) {
  const int64_t S = s.scalers, D = s.width;
  for (int64_t r = 0; r < k.rows; ++r) {
    const T* c = scale + ((k.row + r) / s.group) * S;
    const T* g = grad_out + (k.row + r) * D;
    T* gr = gy + r * S * D;
    for (int64_t q = 0; q < S; ++q) {
      for (int64_t j = 0; j < D; ++j) gr[q * D + j] = c[q] * g[j];
    }
    for (int64_t j = 0; j < D; ++j) grad_bias[j] += g[j];
  }
}

// grad_scale[v, s] = sum over v's rows and j of grad_out[n, j] y[k][s D + j].
template <typename T>
void ScaleGradientRows(const T* grad_out, const T* y, const CombineShape& s, const Block& k,
                       T* grad_scale) {
  const int64_t S = s.scalers, D = s.width;
  for (int64_t v = k.node; v < k.node + k.nodes; ++v) {
    for (int64_t q = 0; q < S; ++q) {
      T sum = 0;
      for (int64_t n = v * s.group; n < (v + 1) * s.group; ++n) {
        const T* g = grad_out + n * D;
        const T* yr = y + (n - k.row) * S * D + q * D;
        for (int64_t j = 0; j < D; ++j) sum += g[j] * yr[j];
      }
      grad_scale[v * S + q] = sum;
    }
  }
}

template <typename T>
std::vector<const T*> Pointers(at::TensorList tensors) {
  std::vector<const T*> out;
  for (const at::Tensor& t : tensors) out.push_back(t.data_ptr<T>());
  return out;
}

template <typename T>
void CombineForward(at::TensorList parts, const at::Tensor& weight, const at::Tensor& scale,
                    const at::Tensor& bias, const CombineShape& s, at::Tensor& out) {
  const Blocks blocks = SplitBlocks(s);
  const std::vector<const T*> part = Pointers<T>(parts);
  const int64_t rows = blocks.nodes_per_block * s.group;
  std::vector<at::Tensor> x(blocks.ranges), y(blocks.ranges);
  for (int64_t r = 0; r < blocks.ranges; ++r) {
    x[r] = at::empty({rows, s.parts * s.part_width}, weight.options());
    y[r] = at::empty({rows, s.scalers * s.width}, weight.options());
  }
  ForEachBlock(s, blocks, [&](int64_t r, const Block& k) {
    at::Tensor xk = x[r].narrow(0, 0, k.rows), yk = y[r].narrow(0, 0, k.rows);
    GatherRows(part, s.part_width, k, xk.data_ptr<T>());
    at::mm_out(yk, xk, weight);
    ScaleRows(yk.data_ptr<T>(), scale.data_ptr<T>(), bias.data_ptr<T>(), s, k, out.data_ptr<T>());
  });
}

// The gradients the backward asks for: the parts' (allocated when asked for), scale's (zeros,
// when asked for), the weight's when to_weight; the bias's always.
struct CombineGradients {
  std::vector<at::Tensor> parts;
  at::Tensor weight, scale, bias;
  bool to_weight = false;
};

// A thread's buffers of one block and its partial gradients.
struct BackwardScratch {
  at::Tensor x, y, gy, gx, grad_weight, grad_bias;
};

template <typename T>
void CombineBackward(at::TensorList parts, const at::Tensor& weight, const at::Tensor& scale,
                     const at::Tensor& grad_out, const CombineShape& s, CombineGradients& g) {
  const Blocks blocks = SplitBlocks(s);
  const std::vector<const T*> part = Pointers<T>(parts);
  const bool to_parts = !g.parts.empty(), to_weight = g.to_weight, to_scale = g.scale.defined();
  std::vector<T*> grad_part;
  for (at::Tensor& t : g.parts) grad_part.push_back(t.data_ptr<T>());
  const int64_t rows = blocks.nodes_per_block * s.group;
  const at::Tensor weight_t = weight.t();
  std::vector<BackwardScratch> scratch(blocks.ranges);
  for (BackwardScratch& w : scratch) {
    w.x = at::empty({rows, s.parts * s.part_width}, weight.options());
    w.gy = at::empty({rows, s.scalers * s.width}, weight.options());
    if (to_scale) w.y = at::empty({rows, s.scalers * s.width}, weight.options());
    if (to_parts) w.gx = at::empty({rows, s.parts * s.part_width}, weight.options());
    if (to_weight) w.grad_weight = at::zeros_like(weight);
    w.grad_bias = at::zeros({s.width}, weight.options());
  }
  ForEachBlock(s, blocks, [&](int64_t r, const Block& k) {
    BackwardScratch& w = scratch[r];
    at::Tensor gy = w.gy.narrow(0, 0, k.rows);
    ProductGradientRows(grad_out.data_ptr<T>(), scale.data_ptr<T>(), s, k, gy.data_ptr<T>(),
                        w.grad_bias.data_ptr<T>());
    if (to_parts) {
      at::Tensor gx = w.gx.narrow(0, 0, k.rows);
      at::mm_out(gx, gy, weight_t);
      ScatterRows(gx.data_ptr<T>(), s.part_width, k, grad_part);
    }
    if (!to_weight && !to_scale) return;
    at::Tensor x = w.x.narrow(0, 0, k.rows);
    GatherRows(part, s.part_width, k, x.data_ptr<T>());
    if (to_weight) w.grad_weight.addmm_(x.t(), gy);
    if (to_scale) {
      at::Tensor y = w.y.narrow(0, 0, k.rows);
      at::mm_out(y, x, weight);
      ScaleGradientRows(grad_out.data_ptr<T>(), y.data_ptr<T>(), s, k, g.scale.data_ptr<T>());
    }
  });
  // The partials in range order.
  g.bias = scratch[0].grad_bias;
  for (int64_t r = 1; r < blocks.ranges; ++r) g.bias += scratch[r].grad_bias;
  if (to_weight) {
    g.weight = scratch[0].grad_weight;
    for (int64_t r = 1; r < blocks.ranges; ++r) g.weight += scratch[r].grad_weight;
  }
}

class PnaCombineFunction : public torch::autograd::Function<PnaCombineFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::TensorList parts_in,
                            const at::Tensor& weight_in, const at::Tensor& scale_in,
                            const at::Tensor& bias_in) {
    const CombineShape s = CheckCombine(parts_in, weight_in, scale_in, bias_in);
    std::vector<at::Tensor> parts;
    for (const at::Tensor& p : parts_in) parts.push_back(p.contiguous());
    const at::Tensor weight = weight_in.contiguous(), scale = scale_in.contiguous(),
                     bias = bias_in.contiguous();
    at::Tensor out = at::empty({s.rows, s.width}, weight.options());
    if (s.rows > 0) {
      AT_DISPATCH_FLOATING_TYPES(weight.scalar_type(), "grail::pna_combine", [&] {
        CombineForward<scalar_t>(parts, weight, scale, bias, s, out);
      });
    }
    std::vector<at::Tensor> saved = parts;
    saved.push_back(weight);
    saved.push_back(scale);
    ctx->save_for_backward(saved);
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor scale = saved.back();
    saved.pop_back();
    const at::Tensor weight = saved.back();
    saved.pop_back();
    const std::vector<at::Tensor>& parts = saved;
    const size_t P = parts.size();
    torch::autograd::variable_list result(P + 3);
    if (!grads[0].defined()) return result;
    const at::Tensor grad_out = grads[0].contiguous();
    // The shape only: the bias is not saved, and an undefined one is not checked.
    const CombineShape s = CheckCombine(parts, weight, scale, at::Tensor());
    bool to_parts = false;
    for (size_t p = 0; p < P; ++p) to_parts = to_parts || ctx->needs_input_grad(p);
    CombineGradients g;
    if (to_parts) {
      for (size_t p = 0; p < P; ++p) g.parts.push_back(at::empty_like(parts[p]));
    }
    g.to_weight = ctx->needs_input_grad(P);
    if (ctx->needs_input_grad(P + 1)) g.scale = at::zeros_like(scale);
    if (s.rows > 0) {
      AT_DISPATCH_FLOATING_TYPES(weight.scalar_type(), "grail::pna_combine_backward", [&] {
        CombineBackward<scalar_t>(parts, weight, scale, grad_out, s, g);
      });
    } else {
      if (g.to_weight) g.weight = at::zeros_like(weight);
      g.bias = at::zeros({s.width}, weight.options());
    }
    for (size_t p = 0; p < P; ++p) {
      if (ctx->needs_input_grad(p)) result[p] = g.parts[p];
    }
    result[P] = g.weight;
    result[P + 1] = g.scale;
    if (ctx->needs_input_grad(P + 2)) result[P + 2] = g.bias;
    return result;
  }
};

at::Tensor PnaCombineImpl(at::TensorList parts, const at::Tensor& weight, const at::Tensor& scale,
                          const at::Tensor& bias) {
  TORCH_CHECK(bias.defined() && weight.defined() && scale.defined(),
              "pna_combine: weight, scale and bias must be tensors");
  if (!weight.is_cpu()) {
    return CombineByScript(parts, weight, scale, bias, CheckCombine(parts, weight, scale, bias));
  }
  return PnaCombineFunction::apply(parts, weight, scale, bias);
}

}  // namespace

// Called by LinkRelationalOps (rspmm.h), so that a static link keeps this file's registration.
void LinkPnaCombine() {}

at::Tensor PnaCombine(const std::vector<at::Tensor>& parts, const at::Tensor& weight,
                      const at::Tensor& scale, const at::Tensor& bias) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("grail::pna_combine", "")
                             .typed<at::Tensor(at::TensorList, const at::Tensor&, const at::Tensor&,
                                               const at::Tensor&)>();
  return op.call(parts, weight, scale, bias);
}

}  // namespace grail::ops

TORCH_LIBRARY_FRAGMENT(grail, m) {
  m.def("pna_combine(Tensor[] parts, Tensor weight, Tensor scale, Tensor bias) -> Tensor",
        &grail::ops::PnaCombineImpl);
}
