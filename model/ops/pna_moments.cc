// grail::pna_moments: schema, checks, the CPU kernels and autograd (pna_moments.h).
#include "model/ops/pna_moments.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/ops/cpu_clones.h"

namespace grail::ops {
namespace {

void CheckMoments(const at::Tensor& sum, const at::Tensor& sum_sq, const at::Tensor& count) {
  TORCH_CHECK(sum.dim() == 2, "pna_moments: sum must be [V, F], got ", sum.sizes());
  TORCH_CHECK(sum_sq.sizes() == sum.sizes(), "pna_moments: sum_sq must have sum's shape ",
              sum.sizes(), ", got ", sum_sq.sizes());
  TORCH_CHECK(count.dim() == 2 && count.size(0) == sum.size(0) && count.size(1) == 1,
              "pna_moments: count must be [V, 1] for sum's V = ", sum.size(0), ", got ",
              count.sizes());
  TORCH_CHECK(sum.scalar_type() == at::kFloat || sum.scalar_type() == at::kDouble,
              "pna_moments: sum must be float or double, got ", sum.scalar_type());
  TORCH_CHECK(sum_sq.scalar_type() == sum.scalar_type() && count.scalar_type() == sum.scalar_type(),
              "pna_moments: sum, sum_sq and count must share a dtype, got ", sum.scalar_type(),
              ", ", sum_sq.scalar_type(), ", ", count.scalar_type());
  TORCH_CHECK(sum_sq.device() == sum.device() && count.device() == sum.device(),
              "pna_moments: sum, sum_sq and count must be on one device, got ", sum.device(), ", ",
              sum_sq.device(), ", ", count.device());
}

// Rows per task: at least a few thousand values, so that a small tensor stays on one thread.
int64_t RowGrain(int64_t features) {
  return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, features));
}

// Each value as TorchScript's `mean = s / c`, `var = q / c - mean * mean` round it; the clamp
// keeps a NaN, as torch.clamp does.
template <typename T>
GRAIL_INLINE void RowMoments(T s, T q, T c, T* mean, T* var) {
  const T m = s / c;
  *mean = m;
  *var = q / c - m * m;
}

template <typename T>
GRAIL_INLINE T Clamped(T var) {
  const T floor = static_cast<T>(kPnaMinVariance);
  return var < floor ? floor : var;
}

// The kernels are compiled for the widest vectors the CPU has (cpu_clones.h; the loops are
// division- and memory-bound); the file is built without contracting a * b - c into one FMA,
// so that each value rounds as the script's operators round it, and without errno for sqrt,
// so that sqrt vectorises (model/ops/CMakeLists.txt).
template <typename T>
GRAIL_VECTOR_CLONES void MomentsRows(const T* __restrict sum, const T* __restrict sum_sq,
                                     const T* __restrict count, int64_t begin, int64_t end,
                                     int64_t F, T* __restrict mean, T* __restrict std) {
  for (int64_t v = begin; v < end; ++v) {
    const T c = count[v];
    for (int64_t i = v * F; i < (v + 1) * F; ++i) {
      T var;
      RowMoments(sum[i], sum_sq[i], c, &mean[i], &var);
      std[i] = std::sqrt(Clamped(var));
    }
  }
}

template <typename T>
void MomentsForward(const T* sum, const T* sum_sq, const T* count, int64_t V, int64_t F, T* mean,
                    T* std) {
  at::parallel_for(0, V, RowGrain(F), [&](int64_t begin, int64_t end) {
    MomentsRows(sum, sum_sq, count, begin, end, F, mean, std);
  });
}

// The chain rule through the six operators, each step as autograd takes it, so that the
// gradients are the script's to the bit: sqrt's grad / (2 std), clamp's where(var >= floor),
// the subtraction's sign, mean * mean's two factors added in turn, the divisions' grad / c. A null
// grad_mean or grad_std (an unused output) reads as zeros.
template <typename T>
GRAIL_VECTOR_CLONES void MomentsGradientRows(const T* __restrict sum, const T* __restrict sum_sq,
                                             const T* __restrict count,
                                             const T* __restrict grad_mean,
                                             const T* __restrict grad_std, int64_t begin,
                                             int64_t end, int64_t F, T* __restrict grad_sum,
                                             T* __restrict grad_sum_sq) {
  const T floor = static_cast<T>(kPnaMinVariance);
  for (int64_t v = begin; v < end; ++v) {
    const T c = count[v];
    for (int64_t i = v * F; i < (v + 1) * F; ++i) {
      T m, var;
      RowMoments(sum[i], sum_sq[i], c, &m, &var);
      const T g_std = grad_std != nullptr ? grad_std[i] : T(0);
      // Unclamped (var >= floor), std is sqrt(var).
      const T g_var = var >= floor ? g_std / (T(2) * std::sqrt(var)) : T(0);
      // mean * mean's two factors arrive after the features' gradient, one at a time.
      const T u = g_var * m;
      const T g_mean = ((grad_mean != nullptr ? grad_mean[i] : T(0)) - u) - u;
      grad_sum[i] = g_mean / c;
      grad_sum_sq[i] = g_var / c;
    }
  }
}

template <typename T>
void MomentsBackward(const T* sum, const T* sum_sq, const T* count, const T* grad_mean,
                     const T* grad_std, int64_t V, int64_t F, T* grad_sum, T* grad_sum_sq) {
  at::parallel_for(0, V, RowGrain(F), [&](int64_t begin, int64_t end) {
    MomentsGradientRows(sum, sum_sq, count, grad_mean, grad_std, begin, end, F, grad_sum,
                        grad_sum_sq);
  });
}

class PnaMomentsFunction : public torch::autograd::Function<PnaMomentsFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& sum_in,
                                                const at::Tensor& sum_sq_in,
                                                const at::Tensor& count_in) {
    const at::Tensor sum = sum_in.contiguous(), sum_sq = sum_sq_in.contiguous(),
                     count = count_in.contiguous();
    at::Tensor mean = at::empty_like(sum), std = at::empty_like(sum);
    AT_DISPATCH_FLOATING_TYPES(sum.scalar_type(), "grail::pna_moments", [&] {
      MomentsForward(sum.data_ptr<scalar_t>(), sum_sq.data_ptr<scalar_t>(),
                     count.data_ptr<scalar_t>(), sum.size(0), sum.size(1),
                     mean.data_ptr<scalar_t>(), std.data_ptr<scalar_t>());
    });
    // The inputs, not the outputs: the backward recomputes mean and the variance from them
    // (rspmm's backward keeps them alive anyway).
    ctx->save_for_backward({sum, sum_sq, count});
    return {mean, std};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list s = ctx->get_saved_variables();
    const at::Tensor &sum = s[0], &sum_sq = s[1], &count = s[2];
    if (!grads[0].defined() && !grads[1].defined())
      return {at::Tensor(), at::Tensor(), at::Tensor()};
    const at::Tensor grad_mean = grads[0].defined() ? grads[0].contiguous() : at::Tensor();
    const at::Tensor grad_std = grads[1].defined() ? grads[1].contiguous() : at::Tensor();
    at::Tensor grad_sum = at::empty_like(sum), grad_sum_sq = at::empty_like(sum);
    AT_DISPATCH_FLOATING_TYPES(sum.scalar_type(), "grail::pna_moments_backward", [&] {
      MomentsBackward(sum.data_ptr<scalar_t>(), sum_sq.data_ptr<scalar_t>(),
                      count.data_ptr<scalar_t>(),
                      grad_mean.defined() ? grad_mean.data_ptr<scalar_t>() : nullptr,
                      grad_std.defined() ? grad_std.data_ptr<scalar_t>() : nullptr, sum.size(0),
                      sum.size(1), grad_sum.data_ptr<scalar_t>(), grad_sum_sq.data_ptr<scalar_t>());
    });
    return {grad_sum, grad_sum_sq, at::Tensor()};
  }
};

std::vector<at::Tensor> PnaMomentsImpl(const at::Tensor& sum, const at::Tensor& sum_sq,
                                       const at::Tensor& count) {
  CheckMoments(sum, sum_sq, count);
  if (sum.is_cpu()) return PnaMomentsFunction::apply(sum, sum_sq, count);
  const at::Tensor mean = sum / count;
  return {mean, (sum_sq / count - mean * mean).clamp(kPnaMinVariance).sqrt()};
}

}  // namespace

// Called by LinkRelationalOps (rspmm.h), so that a static link keeps this file's registration.
void LinkPnaMoments() {}

std::vector<at::Tensor> PnaMoments(const at::Tensor& sum, const at::Tensor& sum_sq,
                                   const at::Tensor& count) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("grail::pna_moments", "")
                             .typed<std::vector<at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                            const at::Tensor&)>();
  return op.call(sum, sum_sq, count);
}

}  // namespace grail::ops

TORCH_LIBRARY_FRAGMENT(grail, m) {
  m.def("pna_moments(Tensor sum, Tensor sum_sq, Tensor count) -> Tensor[]",
        &grail::ops::PnaMomentsImpl);
}
