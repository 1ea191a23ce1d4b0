// grail::rspmm and grail::relational_graph: schemas, argument checks, the CPU registration
// and autograd (the CUDA registration is model/ops/rspmm_cuda_ops.cc).
#include "model/ops/rspmm.h"

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <cstdint>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "model/ops/cpu_clones.h"
#include "model/ops/rspmm_internal.h"
#include "model/ops/rspmm_kernel.h"

namespace grail::ops {
namespace {

constexpr const char* kReductionNames[kNumReductions] = {"sum", "sum_sq", "max", "min"};

// The position of each reduction in `reduce`'s list, -1 when absent.
struct Reductions {
  int slot[kNumReductions] = {-1, -1, -1, -1};
  int count = 0;
};

Reductions ParseReductions(const std::string& reduce) {
  Reductions r;
  size_t begin = 0;
  while (begin <= reduce.size()) {
    size_t end = reduce.find(',', begin);
    if (end == std::string::npos) end = reduce.size();
    const std::string name = reduce.substr(begin, end - begin);
    int kind = -1;
    for (int k = 0; k < kNumReductions; ++k) {
      if (name == kReductionNames[k]) kind = k;
    }
    TORCH_CHECK(kind >= 0, "rspmm: unknown reduction '", name, "' in reduce='", reduce,
                "' (expected a comma-separated list of sum, sum_sq, max, min)");
    TORCH_CHECK(r.slot[kind] < 0, "rspmm: reduction '", name, "' repeated in reduce='", reduce,
                "'");
    r.slot[kind] = r.count++;
    begin = end + 1;
  }
  return r;
}

void CheckIndexTensor(const at::Tensor& t, const char* name, const at::Device& device) {
  TORCH_CHECK(t.scalar_type() == at::kLong, "rspmm: ", name,
              " must be int64 (as grail.relational_graph makes it), got ", t.scalar_type());
  TORCH_CHECK(t.device() == device, "rspmm: ", name, " is on ", t.device(), ", h on ", device);
}

// Whether every a[i] of [0, n) lies in [0, bound), and whether a never decreases: one
// comparison each without a branch, so that the loops vectorise (an unsigned comparison
// catches negative values too). Only when one fails is the offender looked for.
GRAIL_VECTOR_CLONES bool AllBelow(const int64_t* a, int64_t n, int64_t bound) {
  const uint64_t limit = static_cast<uint64_t>(bound);
  uint64_t outside = 0;
  for (int64_t i = 0; i < n; ++i) outside |= static_cast<uint64_t>(a[i]) >= limit;
  return outside == 0;
}
GRAIL_VECTOR_CLONES bool NonDecreasing(const int64_t* a, int64_t n) {
  uint64_t decreases = 0;
  for (int64_t i = 0; i + 1 < n; ++i) decreases |= a[i] > a[i + 1];
  return decreases == 0;
}

// The CPU check entry by entry, throwing at the first entry out of range with what is wrong.
void FindBadEntry(const int64_t* p, const int64_t* src, const int64_t* rel, const int64_t* dst,
                  const int64_t* o, int64_t V, int64_t E, int64_t R) {
  for (int row = 0; row < 2; ++row) {
    const int64_t* q = p + row * (V + 1);
    TORCH_CHECK(q[0] == 0 && q[V] == E, "rspmm: ptr[", row, "] must run from 0 to E = ", E,
                ", got ", q[0], " to ", q[V]);
    for (int64_t v = 0; v < V; ++v) {
      TORCH_CHECK(q[v] <= q[v + 1], "rspmm: ptr[", row, "] decreases at node ", v);
    }
  }
  for (int64_t e = 0; e < E; ++e) {
    TORCH_CHECK(src[e] >= 0 && src[e] < V && dst[e] >= 0 && dst[e] < V, "rspmm: edge ", e,
                " joins nodes ", src[e], " and ", dst[e], ", outside h's ", V, " rows");
    TORCH_CHECK(rel[e] >= 0 && rel[e] < R, "rspmm: edge ", e, " has relation ", rel[e],
                ", outside w's ", R, " rows");
    TORCH_CHECK(o[e] >= 0 && o[e] < E, "rspmm: src_order[", e, "] = ", o[e], " is not an edge id");
  }
}

// Whether the graph's offsets and indices are in range: a bad one would read or write outside
// the tensors. On the CPU every entry is checked (O(V + E), next to the O(E F) product: a
// vectorised pass, then the entry-by-entry one only to name what is wrong); on a device, each
// graph once while it lives unchanged (CheckedGraphs: each check there waits for the device,
// and the layers of a pass and their backward reuse one graph).
void CheckGraph(const at::Tensor& ptr, const at::Tensor& edges, const at::Tensor& order,
                int64_t num_nodes, int64_t num_relations) {
  const int64_t V = num_nodes, E = edges.size(1), R = num_relations;
  if (ptr.is_cpu()) {
    const int64_t* p = ptr.data_ptr<int64_t>();
    const int64_t* src = edges.data_ptr<int64_t>();
    const int64_t* rel = src + E;
    const int64_t* dst = src + 2 * E;
    const int64_t* o = order.data_ptr<int64_t>();
    const bool in_range = p[0] == 0 && p[V] == E && p[V + 1] == 0 && p[2 * V + 1] == E &&
                          NonDecreasing(p, V + 1) && NonDecreasing(p + V + 1, V + 1) &&
                          AllBelow(src, E, V) && AllBelow(rel, E, R) && AllBelow(dst, E, V) &&
                          AllBelow(o, E, E);
    if (!in_range) FindBadEntry(p, src, rel, dst, o, V, E, R);
    return;
  }
  CheckedGraphs* checked = &CheckedDeviceGraphs();
  if (checked->Contains(ptr, edges, order, V, R)) return;
  auto in_range = [](const at::Tensor& t, int64_t lo, int64_t hi) {
    return t.numel() == 0 || (t.min().item<int64_t>() >= lo && t.max().item<int64_t>() < hi);
  };
  TORCH_CHECK(in_range(ptr.select(1, 0), 0, 1) && (ptr.select(1, V) == E).all().item<bool>() &&
                  (V == 0 || (ptr.narrow(1, 1, V) >= ptr.narrow(1, 0, V)).all().item<bool>()),
              "rspmm: ptr must run from 0 to E = ", E, " without decreasing");
  TORCH_CHECK(in_range(edges.select(0, 0), 0, V) && in_range(edges.select(0, 2), 0, V),
              "rspmm: an edge joins nodes outside h's ", V, " rows");
  TORCH_CHECK(in_range(edges.select(0, 1), 0, R), "rspmm: an edge's relation is outside w's ", R,
              " rows");
  TORCH_CHECK(in_range(order, 0, E), "rspmm: src_order holds a value that is not an edge id");
  checked->Add(ptr, edges, order, V, R);
}

void CheckInputs(const at::Tensor& h, const at::Tensor& w, const at::Tensor& init,
                 const at::Tensor& ptr, const at::Tensor& edges, const at::Tensor& order) {
  TORCH_CHECK(h.dim() == 2, "rspmm: h must be [V, F], got ", h.sizes());
  TORCH_CHECK(w.dim() == 2 && w.size(1) == h.size(1),
              "rspmm: w must be [R, F] with h's F = ", h.size(1), ", got ", w.sizes());
  TORCH_CHECK(init.sizes() == h.sizes(), "rspmm: init must have h's shape ", h.sizes(), ", got ",
              init.sizes());
  TORCH_CHECK(h.scalar_type() == at::kFloat || h.scalar_type() == at::kDouble,
              "rspmm: h must be float or double, got ", h.scalar_type());
  TORCH_CHECK(w.scalar_type() == h.scalar_type() && init.scalar_type() == h.scalar_type(),
              "rspmm: h, w and init must share a dtype, got ", h.scalar_type(), ", ",
              w.scalar_type(), ", ", init.scalar_type());
  TORCH_CHECK(w.device() == h.device() && init.device() == h.device(),
              "rspmm: h, w and init must be on one device, got ", h.device(), ", ", w.device(),
              ", ", init.device());
  CheckIndexTensor(ptr, "ptr", h.device());
  CheckIndexTensor(edges, "edges", h.device());
  CheckIndexTensor(order, "src_order", h.device());
  TORCH_CHECK(ptr.dim() == 2 && ptr.size(0) == 2 && ptr.size(1) == h.size(0) + 1,
              "rspmm: ptr must be [2, V + 1] for h's V = ", h.size(0), ", got ", ptr.sizes());
  TORCH_CHECK(edges.dim() == 2 && edges.size(0) == 3, "rspmm: edges must be [3, E], got ",
              edges.sizes());
  TORCH_CHECK(order.dim() == 1 && order.size(0) == edges.size(1),
              "rspmm: src_order must be [E] for edges' E = ", edges.size(1), ", got ",
              order.sizes());
  CheckGraph(ptr, edges, order, h.size(0), w.size(0));
}

RelationalCsr CsrOf(const at::Tensor& ptr, const at::Tensor& edges, const at::Tensor& order) {
  RelationalCsr g;
  g.num_nodes = ptr.size(1) - 1;
  g.num_edges = edges.size(1);
  g.dst_ptr = ptr.data_ptr<int64_t>();
  g.src_ptr = g.dst_ptr + g.num_nodes + 1;
  g.src = edges.data_ptr<int64_t>();
  g.rel = g.src + g.num_edges;
  g.dst = g.src + 2 * g.num_edges;
  g.src_order = order.data_ptr<int64_t>();
  return g;
}

template <typename T>
void RunForward(const RspmmKernels& kernels, const RspmmForwardArgs<T>& args) {
  if constexpr (std::is_same_v<T, float>) {
    kernels.forward_float(args);
  } else {
    kernels.forward_double(args);
  }
}

template <typename T>
void RunBackward(const RspmmKernels& kernels, const RspmmBackwardArgs<T>& args) {
  if constexpr (std::is_same_v<T, float>) {
    kernels.backward_float(args);
  } else {
    kernels.backward_double(args);
  }
}

}  // namespace

CheckedGraphs::Stamp::Stamp(const at::Tensor& t)
    : storage(t.storage().getWeakStorageImpl()),
      offset(t.storage_offset()),
      numel(t.numel()),
      version(t.is_inference() ? 0 : t._version()) {}

bool CheckedGraphs::Stamp::Matches(const at::Tensor& t) const {
  return storage.lock().get() == t.storage().unsafeGetStorageImpl() &&
         offset == t.storage_offset() && numel == t.numel() &&
         version == (t.is_inference() ? 0 : t._version());
}

bool CheckedGraphs::Contains(const at::Tensor& ptr, const at::Tensor& edges,
                             const at::Tensor& order, int64_t num_nodes,
                             int64_t num_relations) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const Graph& g : recent_) {
    if (g.device == ptr.device() && g.num_nodes == num_nodes && g.num_relations <= num_relations &&
        g.ptr.Matches(ptr) && g.edges.Matches(edges) && g.order.Matches(order)) {
      return true;
    }
  }
  return false;
}

void CheckedGraphs::Add(const at::Tensor& ptr, const at::Tensor& edges, const at::Tensor& order,
                        int64_t num_nodes, int64_t num_relations) {
  std::lock_guard<std::mutex> lock(mu_);
  recent_.push_front(
      Graph{Stamp(ptr), Stamp(edges), Stamp(order), ptr.device(), num_nodes, num_relations});
  if (recent_.size() > kRecent) recent_.pop_back();
}

CheckedGraphs& CheckedDeviceGraphs() {
  static auto* checked = new CheckedGraphs;
  return *checked;
}

std::vector<at::Tensor> RspmmForwardWith(const RspmmKernels& kernels, const at::Tensor& h_in,
                                         const at::Tensor& w_in, const at::Tensor& init_in,
                                         const at::Tensor& ptr_in, const at::Tensor& edges_in,
                                         const at::Tensor& order_in, const std::string& reduce) {
  const Reductions r = ParseReductions(reduce);
  const at::Tensor h = h_in.contiguous(), w = w_in.contiguous(), init = init_in.contiguous();
  const at::Tensor ptr = ptr_in.contiguous(), edges = edges_in.contiguous(),
                   order = order_in.contiguous();
  CheckInputs(h, w, init, ptr, edges, order);
  const int64_t V = h.size(0), F = h.size(1);
  std::vector<at::Tensor> out;
  for (int k = 0; k < r.count; ++k) out.push_back(at::empty({V, F}, h.options()));
  if (V * F == 0) return out;
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "grail::rspmm", [&] {
    RspmmForwardArgs<scalar_t> args;
    args.graph = CsrOf(ptr, edges, order);
    args.num_relations = w.size(0);
    args.features = F;
    args.h = h.data_ptr<scalar_t>();
    args.w = w.data_ptr<scalar_t>();
    args.init = init.data_ptr<scalar_t>();
    for (int k = 0; k < kNumReductions; ++k) {
      if (r.slot[k] >= 0) args.out[k] = out[r.slot[k]].data_ptr<scalar_t>();
    }
    RunForward(kernels, args);
  });
  return out;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> RspmmBackwardWith(
    const RspmmKernels& kernels, at::TensorList grad_in, const at::Tensor& h_in,
    const at::Tensor& w_in, const at::Tensor& init_in, at::TensorList out_in,
    const at::Tensor& ptr_in, const at::Tensor& edges_in, const at::Tensor& order_in,
    const std::string& reduce) {
  const Reductions r = ParseReductions(reduce);
  const at::Tensor h = h_in.contiguous(), w = w_in.contiguous(), init = init_in.contiguous();
  const at::Tensor ptr = ptr_in.contiguous(), edges = edges_in.contiguous(),
                   order = order_in.contiguous();
  CheckInputs(h, w, init, ptr, edges, order);
  const int64_t V = h.size(0), F = h.size(1);
  TORCH_CHECK(
      static_cast<int>(grad_in.size()) == r.count && static_cast<int>(out_in.size()) == r.count,
      "rspmm_backward: ", r.count, " reductions need as many gradients and outputs, got ",
      grad_in.size(), " and ", out_in.size());
  // An output the loss does not use has an empty gradient: its reduction drops out.
  std::vector<at::Tensor> grad(r.count), out(r.count);
  bool any = false;
  for (int k = 0; k < r.count; ++k) {
    TORCH_CHECK(out_in[k].sizes() == h.sizes(), "rspmm_backward: out[", k,
                "] must be [V, F] = ", h.sizes(), ", got ", out_in[k].sizes());
    out[k] = out_in[k].to(h.options()).contiguous();
    if (!grad_in[k].defined() || grad_in[k].numel() == 0) continue;
    TORCH_CHECK(grad_in[k].sizes() == h.sizes(), "rspmm_backward: grad[", k,
                "] must be [V, F] = ", h.sizes(), ", got ", grad_in[k].sizes());
    grad[k] = grad_in[k].to(h.options()).contiguous();
    any = true;
  }
  at::Tensor grad_h = at::zeros_like(h), grad_w = at::zeros_like(w),
             grad_init = at::zeros_like(init);
  if (V * F == 0 || !any) return {grad_h, grad_w, grad_init};
  // Scratch for the tie shares of max and min (the CPU kernels hold their own).
  const bool ties = !h.is_cpu() && ((r.slot[kMax] >= 0 && grad[r.slot[kMax]].defined()) ||
                                    (r.slot[kMin] >= 0 && grad[r.slot[kMin]].defined()));
  at::Tensor shares = ties ? at::empty({2, V, F}, h.options()) : at::Tensor();
  AT_DISPATCH_FLOATING_TYPES(h.scalar_type(), "grail::rspmm_backward", [&] {
    RspmmBackwardArgs<scalar_t> args;
    args.graph = CsrOf(ptr, edges, order);
    args.num_relations = w.size(0);
    args.features = F;
    args.h = h.data_ptr<scalar_t>();
    args.w = w.data_ptr<scalar_t>();
    args.init = init.data_ptr<scalar_t>();
    for (int k = 0; k < kNumReductions; ++k) {
      if (r.slot[k] < 0 || !grad[r.slot[k]].defined()) continue;
      args.out[k] = out[r.slot[k]].data_ptr<scalar_t>();
      args.grad[k] = grad[r.slot[k]].data_ptr<scalar_t>();
    }
    if (ties) {
      args.tie_share[kMax] = shares.select(0, 0).data_ptr<scalar_t>();
      args.tie_share[kMin] = shares.select(0, 1).data_ptr<scalar_t>();
    }
    args.grad_h = grad_h.data_ptr<scalar_t>();
    args.grad_w = grad_w.data_ptr<scalar_t>();
    args.grad_init = grad_init.data_ptr<scalar_t>();
    RunBackward(kernels, args);
  });
  return {grad_h, grad_w, grad_init};
}

namespace {

constexpr RspmmKernels kCpuKernels = {&RspmmForwardCpu<float>, &RspmmForwardCpu<double>,
                                      &RspmmBackwardCpu<float>, &RspmmBackwardCpu<double>};

std::vector<at::Tensor> RspmmCpu(const at::Tensor& h, const at::Tensor& w, const at::Tensor& init,
                                 const at::Tensor& ptr, const at::Tensor& edges,
                                 const at::Tensor& order, std::string reduce) {
  return RspmmForwardWith(kCpuKernels, h, w, init, ptr, edges, order, reduce);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> RspmmBackwardCpuOp(
    at::TensorList grad, const at::Tensor& h, const at::Tensor& w, const at::Tensor& init,
    at::TensorList out, const at::Tensor& ptr, const at::Tensor& edges, const at::Tensor& order,
    std::string reduce) {
  return RspmmBackwardWith(kCpuKernels, grad, h, w, init, out, ptr, edges, order, reduce);
}

const auto& RspmmOp() {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("grail::rspmm", "")
          .typed<std::vector<at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                         std::string)>();
  return op;
}

const auto& RspmmBackwardOp() {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("grail::rspmm_backward", "")
                             .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
                                 at::TensorList, const at::Tensor&, const at::Tensor&,
                                 const at::Tensor&, at::TensorList, const at::Tensor&,
                                 const at::Tensor&, const at::Tensor&, std::string)>();
  return op;
}

class RspmmFunction : public torch::autograd::Function<RspmmFunction> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx,
                                                const at::Tensor& h, const at::Tensor& w,
                                                const at::Tensor& init, const at::Tensor& ptr,
                                                const at::Tensor& edges, const at::Tensor& order,
                                                const std::string& reduce) {
    std::vector<at::Tensor> out;
    {
      at::AutoDispatchBelowADInplaceOrView below;
      out = RspmmOp().call(h, w, init, ptr, edges, order, reduce);
    }
    std::vector<at::Tensor> saved = {h, w, init, ptr, edges, order};
    saved.insert(saved.end(), out.begin(), out.end());
    ctx->save_for_backward(saved);
    ctx->saved_data["reduce"] = reduce;
    return out;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list s = ctx->get_saved_variables();
    const std::vector<at::Tensor> out(s.begin() + 6, s.end());
    std::vector<at::Tensor> grad;
    for (const at::Tensor& g : grads) grad.push_back(g.defined() ? g : at::empty({0}));
    auto [grad_h, grad_w, grad_init] = RspmmBackwardOp().call(
        grad, s[0], s[1], s[2], out, s[3], s[4], s[5], ctx->saved_data["reduce"].toStringRef());
    return {grad_h, grad_w, grad_init, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

std::vector<at::Tensor> RspmmAutograd(const at::Tensor& h, const at::Tensor& w,
                                      const at::Tensor& init, const at::Tensor& ptr,
                                      const at::Tensor& edges, const at::Tensor& order,
                                      std::string reduce) {
  return RspmmFunction::apply(h, w, init, ptr, edges, order, reduce);
}

// Checks an edge list; returns its relations' bound (the largest relation + 1; 0 for none).
int64_t CheckEdgeList(const at::Tensor& src, const at::Tensor& rel, const at::Tensor& dst,
                      int64_t num_nodes) {
  TORCH_CHECK(num_nodes >= 0, "relational_graph: num_nodes must be >= 0, got ", num_nodes);
  for (const auto& [t, name] : {std::pair{&src, "src"}, {&rel, "rel"}, {&dst, "dst"}}) {
    TORCH_CHECK(t->scalar_type() == at::kLong && t->dim() == 1, "relational_graph: ", name,
                " must be a 1-D int64 tensor, got ", t->scalar_type(), " ", t->sizes());
    TORCH_CHECK(t->size(0) == src.size(0), "relational_graph: src, rel and dst differ in length");
    TORCH_CHECK(t->device() == src.device(), "relational_graph: src, rel and dst differ in device");
  }
  if (src.numel() == 0) return 0;
  // Every bound in one read: on a device each read waits for it.
  const at::Tensor bounds =
      at::stack({src.min(), src.max(), dst.min(), dst.max(), rel.min(), rel.max()}).cpu();
  const int64_t* b = bounds.data_ptr<int64_t>();
  TORCH_CHECK(b[0] >= 0 && b[1] < num_nodes && b[2] >= 0 && b[3] < num_nodes,
              "relational_graph: an edge joins nodes outside [0, ", num_nodes, ")");
  TORCH_CHECK(b[4] >= 0, "relational_graph: a relation is negative");
  return b[5] + 1;
}

// Counting sort on the CPU; sorts (stable) elsewhere.
std::tuple<at::Tensor, at::Tensor, at::Tensor> RelationalGraphImpl(const at::Tensor& src_in,
                                                                   const at::Tensor& rel_in,
                                                                   const at::Tensor& dst_in,
                                                                   int64_t num_nodes) {
  const at::Tensor src = src_in.contiguous(), rel = rel_in.contiguous(), dst = dst_in.contiguous();
  const int64_t relations = CheckEdgeList(src, rel, dst, num_nodes);
  const int64_t V = num_nodes, E = src.size(0);
  const at::TensorOptions options = src.options();
  if (src.is_cpu()) {
    at::Tensor ptr = at::empty({2, V + 1}, options), edges = at::empty({3, E}, options),
               order = at::empty({E}, options);
    BuildRelationalCsr(V, E, src.data_ptr<int64_t>(), rel.data_ptr<int64_t>(),
                       dst.data_ptr<int64_t>(), edges.data_ptr<int64_t>(), ptr.data_ptr<int64_t>(),
                       ptr.data_ptr<int64_t>() + V + 1, order.data_ptr<int64_t>());
    CheckedDeviceGraphs().Add(ptr, edges, order, V, relations);
    return {ptr, edges, order};
  }
  const at::Tensor by_dst = std::get<1>(at::sort(dst, /*stable=*/true, 0, false));
  const at::Tensor edges = at::stack({src, rel, dst}).index_select(1, by_dst);
  const at::Tensor order = std::get<1>(at::sort(edges.select(0, 0), /*stable=*/true, 0, false));
  auto offsets = [&](const at::Tensor& index) {
    return at::cat({at::zeros({1}, options), at::bincount(index, {}, V).cumsum(0)});
  };
  const at::Tensor ptr = at::stack({offsets(dst), offsets(src)});
  // Built from the checked edge list: rspmm need not check it again.
  CheckedDeviceGraphs().Add(ptr, edges, order, V, relations);
  return {ptr, edges, order};
}

}  // namespace

#ifdef GRAIL_WITH_CUDA
void LinkRelationalCudaOps();  // model/ops/rspmm_cuda_ops.cc
#endif

void LinkPnaMoments();  // model/ops/pna_moments.cc
void LinkPnaCombine();  // model/ops/pna_combine.cc

void LinkRelationalOps() {
  LinkPnaMoments();
  LinkPnaCombine();
#ifdef GRAIL_WITH_CUDA
  LinkRelationalCudaOps();
#endif
}

std::vector<at::Tensor> Rspmm(const at::Tensor& h, const at::Tensor& w, const at::Tensor& init,
                              const at::Tensor& ptr, const at::Tensor& edges,
                              const at::Tensor& src_order, const std::string& reduce) {
  return RspmmOp().call(h, w, init, ptr, edges, src_order, reduce);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> RelationalGraph(const at::Tensor& src,
                                                               const at::Tensor& rel,
                                                               const at::Tensor& dst,
                                                               int64_t num_nodes) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("grail::relational_graph", "")
          .typed<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
              const at::Tensor&, const at::Tensor&, const at::Tensor&, int64_t)>();
  return op.call(src, rel, dst, num_nodes);
}

}  // namespace grail::ops

TORCH_LIBRARY(grail, m) {
  m.def(
      "rspmm(Tensor h, Tensor w, Tensor init, Tensor ptr, Tensor edges, Tensor src_order, "
      "str reduce) -> Tensor[]");
  m.def(
      "rspmm_backward(Tensor[] grad, Tensor h, Tensor w, Tensor init, Tensor[] out, Tensor ptr, "
      "Tensor edges, Tensor src_order, str reduce) -> (Tensor, Tensor, Tensor)");
  m.def(
      "relational_graph(Tensor src, Tensor rel, Tensor dst, int num_nodes) -> "
      "(Tensor, Tensor, Tensor)",
      &grail::ops::RelationalGraphImpl);
}

TORCH_LIBRARY_IMPL(grail, CPU, m) {
  m.impl("rspmm", &grail::ops::RspmmCpu);
  m.impl("rspmm_backward", &grail::ops::RspmmBackwardCpuOp);
}

TORCH_LIBRARY_IMPL(grail, Autograd, m) { m.impl("rspmm", &grail::ops::RspmmAutograd); }
