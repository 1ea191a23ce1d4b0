// grail::rspmm against the per-edge formulation it replaces (index_select, index_add,
// scatter_reduce over materialised messages, as the path model computed before): forward
// and backward, float and double, on random graphs with a hub, isolated nodes, self-loops
// and relations without edges, for one query (F = d) and 64 queries folded into the
// features (F = 64 d); ties of max and min; the graph builder; argument errors.
#include "model/ops/rspmm.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/ops/rspmm_internal.h"

namespace grail::ops {
namespace {

using ::testing::HasSubstr;

struct EdgeList {
  int64_t nodes = 0, relations = 0;
  torch::Tensor src, rel, dst;
};

// Random edges over `nodes` nodes: a hub (node 0) with a third of all edges in and out,
// self-loops, the last 5 nodes isolated and the last 3 relations unused.
EdgeList RandomGraph(int64_t nodes, int64_t edges, int64_t relations, uint64_t seed) {
  torch::manual_seed(seed);
  const int64_t connected = nodes - 5;
  EdgeList g;
  g.nodes = nodes;
  g.relations = relations;
  g.src = torch::randint(connected, {edges}, torch::kInt64);
  g.dst = torch::randint(connected, {edges}, torch::kInt64);
  g.rel = torch::randint(relations - 3, {edges}, torch::kInt64);
  g.dst.slice(0, 0, edges / 6).fill_(0);          // into the hub
  g.src.slice(0, edges / 6, edges / 3).fill_(0);  // out of the hub
  g.dst.slice(0, edges / 3, edges / 3 + 7).copy_(g.src.slice(0, edges / 3, edges / 3 + 7));
  return g;
}

// The per-edge formulation: every message materialised, then reduced.
torch::Tensor Reference(const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& init,
                        const EdgeList& g, const std::vector<std::string>& reduce) {
  const torch::Tensor m = h.index_select(0, g.src) * w.index_select(0, g.rel);
  const torch::Tensor index = g.dst.unsqueeze(1).expand_as(m);
  std::vector<torch::Tensor> out;
  for (const std::string& r : reduce) {
    if (r == "sum") out.push_back(init.index_add(0, g.dst, m));
    if (r == "sum_sq") out.push_back((init * init).index_add(0, g.dst, m * m));
    if (r == "max") out.push_back(init.scatter_reduce(0, index, m, "amax", true));
    if (r == "min") out.push_back(init.scatter_reduce(0, index, m, "amin", true));
  }
  return torch::stack(out);
}

torch::Tensor Fused(const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& init,
                    const EdgeList& g, const std::string& reduce) {
  auto [ptr, edges, order] = RelationalGraph(g.src, g.rel, g.dst, g.nodes);
  return torch::stack(Rspmm(h, w, init, ptr, edges, order, reduce));
}

std::string Join(const std::vector<std::string>& names) {
  std::string joined;
  for (const std::string& n : names) joined += (joined.empty() ? "" : ",") + n;
  return joined;
}

// max |a - b| / max |b|: the largest difference relative to the tensor's scale (a sum of
// hundreds of float terms in another order differs by more than 1e-5 of a small entry).
double MaxRelativeDifference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(1e-30, b.abs().max().item<double>());
}

struct Case {
  torch::Dtype dtype;
  int64_t queries;
  std::vector<std::string> reduce;
};

class RspmmMatchesPerEdgeFormulation : public ::testing::TestWithParam<Case> {};

TEST_P(RspmmMatchesPerEdgeFormulation, ForwardAndBackward) {
  const Case c = GetParam();
  const double tolerance = c.dtype == torch::kDouble ? 1e-10 : 1e-5;
  const int64_t d = 8;
  const EdgeList g = RandomGraph(/*nodes=*/60, /*edges=*/400, /*relations=*/9, /*seed=*/7);
  const auto options = torch::TensorOptions().dtype(c.dtype);
  const int64_t F = c.queries * d;
  // Rows of init: zero but for a few (the boundary), so that max and min meet ties at 0.
  const torch::Tensor h0 = torch::randn({g.nodes, F}, options);
  const torch::Tensor w0 = torch::randn({g.relations, F}, options);
  const torch::Tensor init0 =
      torch::zeros({g.nodes, F}, options)
          .index_copy(0, torch::tensor({0, 3, 11}), torch::randn({3, F}, options));
  std::vector<torch::Tensor> grads[2];
  torch::Tensor outs[2];
  const torch::Tensor weight = torch::randn({int64_t(c.reduce.size()), g.nodes, F}, options);
  for (int fused = 0; fused < 2; ++fused) {
    torch::Tensor h = h0.clone().requires_grad_(true), w = w0.clone().requires_grad_(true),
                  init = init0.clone().requires_grad_(true);
    outs[fused] = fused ? Fused(h, w, init, g, Join(c.reduce)) : Reference(h, w, init, g, c.reduce);
    (outs[fused] * weight).sum().backward();
    grads[fused] = {h.grad(), w.grad(), init.grad()};
  }
  EXPECT_LE(MaxRelativeDifference(outs[1], outs[0]), tolerance);
  const char* names[] = {"h", "w", "init"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_LE(MaxRelativeDifference(grads[1][i], grads[0][i]), tolerance)
        << "gradient of " << names[i];
  }
}

INSTANTIATE_TEST_SUITE_P(
    Reductions, RspmmMatchesPerEdgeFormulation,
    ::testing::Values(Case{torch::kDouble, 1, {"sum"}}, Case{torch::kDouble, 1, {"sum_sq"}},
                      Case{torch::kDouble, 1, {"max"}}, Case{torch::kDouble, 1, {"min"}},
                      Case{torch::kDouble, 1, {"sum", "sum_sq", "max", "min"}},
                      Case{torch::kDouble, 64, {"sum", "sum_sq", "max", "min"}},
                      Case{torch::kDouble, 64, {"min", "sum"}},
                      Case{torch::kFloat, 1, {"sum", "sum_sq", "max", "min"}},
                      Case{torch::kFloat, 64, {"sum", "sum_sq", "max", "min"}},
                      Case{torch::kFloat, 64, {"sum"}}),
    [](const ::testing::TestParamInfo<Case>& info) {
      std::string name = info.param.dtype == torch::kDouble ? "Double" : "Float";
      name += "Queries" + std::to_string(info.param.queries);
      for (const std::string& r : info.param.reduce) name += r == "sum_sq" ? "SumSq" : r;
      return name;
    });

TEST(RspmmTest, TiesShareTheGradientAsScatterReduceDoes) {
  // Node 2 receives two equal messages (h rows equal, same relation) and init equal to them.
  EdgeList g;
  g.nodes = 3;
  g.relations = 1;
  g.src = torch::tensor({0, 1}, torch::kInt64);
  g.rel = torch::tensor({0, 0}, torch::kInt64);
  g.dst = torch::tensor({2, 2}, torch::kInt64);
  const auto options = torch::TensorOptions().dtype(torch::kDouble);
  for (const std::string reduce : {"max", "min"}) {
    std::vector<torch::Tensor> grads[2];
    for (int fused = 0; fused < 2; ++fused) {
      torch::Tensor h = torch::full({3, 2}, 2.0, options).requires_grad_(true);
      torch::Tensor w = torch::ones({1, 2}, options).requires_grad_(true);
      torch::Tensor init = torch::full({3, 2}, 2.0, options).requires_grad_(true);
      (fused ? Fused(h, w, init, g, reduce) : Reference(h, w, init, g, {reduce})).sum().backward();
      grads[fused] = {h.grad(), w.grad(), init.grad()};
    }
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(torch::allclose(grads[1][i], grads[0][i])) << reduce;
    EXPECT_DOUBLE_EQ(grads[1][2][2][0].item<double>(), 1.0 / 3);  // init shares a third
  }
}

TEST(RspmmTest, ResultsDoNotDependOnTheThreadCount) {
  const EdgeList g = RandomGraph(200, 3000, 12, 3);
  const torch::Tensor h = torch::randn({g.nodes, 512}).requires_grad_(true);
  const torch::Tensor w = torch::randn({g.relations, 512}).requires_grad_(true);
  const torch::Tensor init = torch::randn({g.nodes, 512});
  const int threads = at::get_num_threads();
  torch::Tensor out[2], grad_w[2];
  for (int t = 0; t < 2; ++t) {
    at::set_num_threads(t == 0 ? 1 : 3);
    out[t] = Fused(h, w, init, g, "sum,max");
    grad_w[t] = torch::autograd::grad({out[t].sum()}, {w})[0];
  }
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(out[0], out[1]));  // each row is reduced by one thread, in order
  EXPECT_LE(MaxRelativeDifference(grad_w[1], grad_w[0]), 1e-5);
}

TEST(RspmmTest, ANodeWithoutEdgesKeepsItsInit) {
  EdgeList g = RandomGraph(30, 100, 4, 5);
  const torch::Tensor h = torch::randn({g.nodes, 4}), w = torch::randn({g.relations, 4});
  const torch::Tensor init = torch::randn({g.nodes, 4});
  const torch::Tensor out = Fused(h, w, init, g, "sum,sum_sq,max,min");
  const int64_t isolated = g.nodes - 1;
  EXPECT_TRUE(torch::equal(out[0][isolated], init[isolated]));
  EXPECT_TRUE(torch::equal(out[1][isolated], init[isolated] * init[isolated]));
  EXPECT_TRUE(torch::equal(out[2][isolated], init[isolated]));
  EXPECT_TRUE(torch::equal(out[3][isolated], init[isolated]));
}

TEST(RspmmTest, RelationalGraphSortsByDestinationStablyAndListsEachSourcesEdges) {
  const EdgeList g = RandomGraph(40, 300, 5, 11);
  auto [ptr, edges, order] = RelationalGraph(g.src, g.rel, g.dst, g.nodes);
  const torch::Tensor by_dst = std::get<1>(torch::sort(g.dst, /*stable=*/true, 0, false));
  EXPECT_TRUE(torch::equal(edges[0], g.src.index_select(0, by_dst)));
  EXPECT_TRUE(torch::equal(edges[1], g.rel.index_select(0, by_dst)));
  EXPECT_TRUE(torch::equal(edges[2], g.dst.index_select(0, by_dst)));
  for (int64_t v = 0; v < g.nodes; ++v) {
    const int64_t in = ptr[0][v + 1].item<int64_t>() - ptr[0][v].item<int64_t>();
    const int64_t out = ptr[1][v + 1].item<int64_t>() - ptr[1][v].item<int64_t>();
    EXPECT_EQ(in, (g.dst == v).sum().item<int64_t>()) << v;
    EXPECT_EQ(out, (g.src == v).sum().item<int64_t>()) << v;
    for (int64_t i = ptr[1][v].item<int64_t>(); i < ptr[1][v + 1].item<int64_t>(); ++i) {
      EXPECT_EQ(edges[0][order[i].item<int64_t>()].item<int64_t>(), v);
    }
  }
}

// A device graph is checked once while it lives unchanged: what the cache of checked graphs
// answers for the same, a changed, a freed and a differently sized graph.
TEST(RspmmTest, AGraphIsCheckedAgainOnceChangedFreedOrUsedWithOtherSizes) {
  CheckedGraphs checked;
  const EdgeList g = RandomGraph(30, 200, 4, 5);
  auto [ptr, edges, order] = RelationalGraph(g.src, g.rel, g.dst, g.nodes);
  EXPECT_FALSE(checked.Contains(ptr, edges, order, g.nodes, 4));
  checked.Add(ptr, edges, order, g.nodes, 4);
  EXPECT_TRUE(checked.Contains(ptr, edges, order, g.nodes, 4));
  EXPECT_FALSE(checked.Contains(ptr, edges, order, g.nodes + 1, 4));
  EXPECT_FALSE(checked.Contains(ptr, edges, order, g.nodes, 3));
  EXPECT_TRUE(checked.Contains(ptr, edges, order, g.nodes, 5));  // in range for more relations
  EXPECT_FALSE(checked.Contains(ptr, edges.clone(), order, g.nodes, 4));
  EXPECT_FALSE(checked.Contains(ptr, edges.narrow(1, 0, 100), order.narrow(0, 0, 100), g.nodes, 4));
  edges[1][0].fill_(1000);  // in place: the version counter moves
  EXPECT_FALSE(checked.Contains(ptr, edges, order, g.nodes, 4));
  checked.Add(ptr, edges, order, g.nodes, 4);
  EXPECT_TRUE(checked.Contains(ptr, edges, order, g.nodes, 4));

  // A freed graph's entry never answers for a new one, wherever its memory lands.
  for (int i = 0; i < 8; ++i) {
    auto [p, e, o] = RelationalGraph(g.src, g.rel, g.dst, g.nodes);
    EXPECT_FALSE(checked.Contains(p, e, o, g.nodes, 4)) << i;
    checked.Add(p, e, o, g.nodes, 4);
  }
  // The cache keeps a few graphs: the first has gone by now.
  EXPECT_FALSE(checked.Contains(ptr, edges, order, g.nodes, 4));
}

// relational_graph checks its edge list and adds the graph it builds to the checked ones, for
// the relations it holds: rspmm does not wait for the device to check it again.
TEST(RspmmTest, ARelationalGraphIsCheckedForTheRelationsItHolds) {
  const EdgeList g = RandomGraph(30, 200, 4, 5);
  const int64_t bound = g.rel.max().item<int64_t>() + 1;
  auto [ptr, edges, order] = RelationalGraph(g.src, g.rel, g.dst, g.nodes);
  EXPECT_TRUE(CheckedDeviceGraphs().Contains(ptr, edges, order, g.nodes, bound));
  EXPECT_FALSE(CheckedDeviceGraphs().Contains(ptr, edges, order, g.nodes, bound - 1));
  EXPECT_FALSE(CheckedDeviceGraphs().Contains(ptr, edges.clone(), order, g.nodes, bound));
}

TEST(RspmmTest, BadArgumentsAreRefusedWithWhatIsWrong) {
  const EdgeList g = RandomGraph(20, 50, 4, 1);
  auto [ptr, edges, order] = RelationalGraph(g.src, g.rel, g.dst, g.nodes);
  const torch::Tensor h = torch::randn({g.nodes, 4}), w = torch::randn({g.relations, 4});
  auto error = [&](const torch::Tensor& hh, const torch::Tensor& ww, const torch::Tensor& p,
                   const torch::Tensor& e, const std::string& reduce,
                   const torch::Tensor& o = {}) -> std::string {
    try {
      Rspmm(hh, ww, torch::zeros_like(hh), p, e, o.defined() ? o : order, reduce);
    } catch (const c10::Error& err) {
      return err.what_without_backtrace();
    }
    return "";
  };
  EXPECT_THAT(error(h, w, ptr, edges, "sum,mean"), HasSubstr("unknown reduction 'mean'"));
  EXPECT_THAT(error(h, w, ptr, edges, "max,max"), HasSubstr("repeated"));
  EXPECT_THAT(error(h, torch::randn({g.relations, 5}), ptr, edges, "sum"),
              HasSubstr("w must be [R, F]"));
  torch::Tensor bad = edges.clone();
  bad[1][3] = g.relations;
  EXPECT_THAT(error(h, w, ptr, bad, "sum"), HasSubstr("outside w's 4 rows"));
  bad = edges.clone();
  bad[0][3] = g.nodes;
  EXPECT_THAT(error(h, w, ptr, bad, "sum"), HasSubstr("outside h's 20 rows"));
  // Every index is checked, negative ones too, wherever it lies; and the offsets of both
  // directions.
  for (int64_t row : {0, 1, 2}) {
    for (int64_t e : {int64_t{0}, g.src.size(0) / 2, g.src.size(0) - 1}) {
      bad = edges.clone();
      bad[row][e] = -1;
      EXPECT_THAT(error(h, w, ptr, bad, "sum"),
                  HasSubstr("rspmm: edge " + std::to_string(e) +
                            (row == 1 ? " has relation -1" : " joins nodes")));
    }
  }
  torch::Tensor bad_order = order.clone();
  bad_order[g.src.size(0) - 1] = g.src.size(0);
  EXPECT_THAT(error(h, w, ptr, edges, "sum", bad_order), HasSubstr("is not an edge id"));
  for (int64_t row : {0, 1}) {
    torch::Tensor bad_ptr = ptr.clone();
    bad_ptr[row][10] = bad_ptr[row][11] + 1;
    EXPECT_THAT(error(h, w, bad_ptr, edges, "sum"),
                HasSubstr("ptr[" + std::to_string(row) + "] decreases at node 10"));
    bad_ptr = ptr.clone();
    bad_ptr[row][g.nodes] = g.src.size(0) - 1;
    EXPECT_THAT(error(h, w, bad_ptr, edges, "sum"),
                HasSubstr("ptr[" + std::to_string(row) + "] must run from 0 to E"));
  }
  EXPECT_THAT(error(h.to(torch::kInt32), w, ptr, edges, "sum"), HasSubstr("float or double"));
  EXPECT_THAT(error(h, w, ptr.to(torch::kInt32), edges, "sum"), HasSubstr("ptr must be int64"));
  try {
    RelationalGraph(g.src, g.rel, g.dst, 3);
    ADD_FAILURE() << "an edge outside the nodes was accepted";
  } catch (const c10::Error& err) {
    EXPECT_THAT(err.what_without_backtrace(), HasSubstr("outside [0, 3)"));
  }
}

}  // namespace
}  // namespace grail::ops
