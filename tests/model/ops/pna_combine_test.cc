// grail::pna_combine against the script it replaces in a PNA layer, `(matmul(cat(parts, 1),
// weight).view(V, G, S, D) * scale.view(V, 1, S, 1)).sum(2).view(-1, D) + bias`: values and
// every input's gradient, float and double, one column per node (G = 1) and a batch's 64, over
// one block of rows and many (split over both threads); inputs that need no gradient; no rows;
// argument errors.
#include "model/ops/pna_combine.h"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grail::ops {
namespace {

using ::testing::HasSubstr;

torch::Tensor Reference(const std::vector<torch::Tensor>& parts, const torch::Tensor& weight,
                        const torch::Tensor& scale, const torch::Tensor& bias) {
  const int64_t V = scale.size(0), S = scale.size(1), D = weight.size(1) / S;
  const int64_t G = parts[0].size(0) / V;
  return (torch::matmul(torch::cat(parts, 1), weight).view({V, G, S, D}) * scale.view({V, 1, S, 1}))
             .sum(2)
             .view({-1, D}) +
         bias;
}

double RelativeError(const torch::Tensor& got, const torch::Tensor& expected) {
  return ((got - expected).abs().max() / expected.abs().max().clamp_min(1e-30)).item<double>();
}

struct Case {
  torch::ScalarType dtype;
  int64_t nodes, group;  // V, G
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << (c.dtype == torch::kFloat ? "float" : "double") << ", V = " << c.nodes
      << ", G = " << c.group;
}

class PnaCombineMatchesTheScript : public ::testing::TestWithParam<Case> {};

TEST_P(PnaCombineMatchesTheScript, ForwardAndEveryGradient) {
  const Case c = GetParam();
  at::set_num_threads(2);
  torch::manual_seed(11);
  const auto options = torch::TensorOptions().dtype(c.dtype);
  const int64_t P = 5, d = 32, S = 3, D = 32, N = c.nodes * c.group;
  std::vector<torch::Tensor> parts0;
  for (int64_t p = 0; p < P; ++p) parts0.push_back(torch::randn({N, d}, options));
  const torch::Tensor weight0 = torch::randn({P * d, S * D}, options) / 8;
  const torch::Tensor scale0 = torch::rand({c.nodes, S}, options) * 3;
  const torch::Tensor bias0 = torch::randn({D}, options);
  const torch::Tensor loss_weight = torch::randn({N, D}, options);
  torch::Tensor out[2];
  std::vector<torch::Tensor> grads[2];
  for (int fused = 0; fused < 2; ++fused) {
    std::vector<torch::Tensor> parts;
    for (const torch::Tensor& p : parts0) parts.push_back(p.clone().requires_grad_(true));
    const torch::Tensor weight = weight0.clone().requires_grad_(true);
    const torch::Tensor scale = scale0.clone().requires_grad_(true);
    const torch::Tensor bias = bias0.clone().requires_grad_(true);
    out[fused] =
        fused ? PnaCombine(parts, weight, scale, bias) : Reference(parts, weight, scale, bias);
    (out[fused] * loss_weight).sum().backward();
    for (const torch::Tensor& p : parts) grads[fused].push_back(p.grad());
    grads[fused].push_back(weight.grad());
    grads[fused].push_back(scale.grad());
    grads[fused].push_back(bias.grad());
  }
  // The products run over other blocks of rows than the script's one product, and the
  // gradients of weight, scale and bias sum over rows in another order.
  const double tolerance = c.dtype == torch::kFloat ? 1e-5 : 1e-12;
  ASSERT_EQ(out[1].sizes(), out[0].sizes());
  EXPECT_LT(RelativeError(out[1], out[0]), tolerance);
  const char* names[] = {"mean", "max", "min", "std", "state", "weight", "scale", "bias"};
  for (size_t i = 0; i < grads[0].size(); ++i) {
    ASSERT_TRUE(grads[1][i].defined()) << names[i];
    ASSERT_EQ(grads[1][i].sizes(), grads[0][i].sizes()) << names[i];
    EXPECT_LT(RelativeError(grads[1][i], grads[0][i]), tolerance) << names[i];
  }
}

// One block of rows (97 nodes) and many (blocks of 2,048 rows: 6,000 nodes of one row and
// 300 of 64).
INSTANTIATE_TEST_SUITE_P(DtypesAndBlocks, PnaCombineMatchesTheScript,
                         ::testing::Values(Case{torch::kFloat, 97, 1}, Case{torch::kFloat, 6000, 1},
                                           Case{torch::kFloat, 300, 64},
                                           Case{torch::kDouble, 97, 1},
                                           Case{torch::kDouble, 300, 64}));

TEST(PnaCombineTest, InputsThatNeedNoGradientGetNone) {
  torch::manual_seed(3);
  const int64_t V = 40, G = 4, d = 8;
  std::vector<torch::Tensor> parts = {torch::randn({V * G, d}), torch::randn({V * G, d})};
  const torch::Tensor weight = torch::randn({2 * d, 3 * d}).requires_grad_(true);
  const torch::Tensor scale = torch::rand({V, 3});
  const torch::Tensor bias = torch::randn({d});
  PnaCombine(parts, weight, scale, bias).sum().backward();
  EXPECT_TRUE(weight.grad().defined());
  EXPECT_FALSE(parts[0].grad().defined());
  EXPECT_FALSE(scale.grad().defined());
  // With only the parts asking, the parts get theirs as the script gives them.
  const torch::Tensor part = parts[1].clone().requires_grad_(true);
  PnaCombine({parts[0], part}, weight.detach(), scale, bias).sum().backward();
  const torch::Tensor reference = part.detach().clone().requires_grad_(true);
  Reference({parts[0], reference}, weight.detach(), scale, bias).sum().backward();
  EXPECT_LT(RelativeError(part.grad(), reference.grad()), 1e-5);
}

TEST(PnaCombineTest, NoRowsGiveNoRowsAndZeroGradients) {
  const torch::Tensor weight = torch::randn({16, 24}).requires_grad_(true);
  const torch::Tensor bias = torch::randn({8}).requires_grad_(true);
  const torch::Tensor part = torch::randn({0, 8}).requires_grad_(true);
  const torch::Tensor out = PnaCombine({part, part}, weight, torch::rand({0, 3}), bias);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{0, 8}));
  out.sum().backward();
  EXPECT_TRUE(torch::equal(weight.grad(), torch::zeros_like(weight)));
  EXPECT_TRUE(torch::equal(bias.grad(), torch::zeros_like(bias)));
}

TEST(PnaCombineTest, BadArgumentsAreRefusedWithWhatIsWrong) {
  const torch::Tensor a = torch::randn({12, 4}), b = torch::randn({12, 4});
  const torch::Tensor weight = torch::randn({8, 6}), scale = torch::rand({6, 3}),
                      bias = torch::randn({2});
  auto error = [](const std::vector<torch::Tensor>& parts, const torch::Tensor& w,
                  const torch::Tensor& s, const torch::Tensor& bi) -> std::string {
    try {
      PnaCombine(parts, w, s, bi);
    } catch (const c10::Error& e) {
      return e.what_without_backtrace();
    }
    return "";
  };
  EXPECT_EQ(error({a, b}, weight, scale, bias), "");
  EXPECT_THAT(error({}, weight, scale, bias), HasSubstr("at least one tensor"));
  EXPECT_THAT(error({a, torch::randn({12, 5})}, weight, scale, bias),
              HasSubstr("parts[1] must have parts[0]'s shape"));
  EXPECT_THAT(error({a, b}, torch::randn({9, 6}), scale, bias), HasSubstr("weight must be [P d"));
  EXPECT_THAT(error({a, b}, torch::randn({8, 7}), scale, bias), HasSubstr("weight must be [P d"));
  EXPECT_THAT(error({a, b}, weight, torch::rand({5, 3}), bias), HasSubstr("a multiple of"));
  EXPECT_THAT(error({a, b}, weight, scale, torch::randn({3})), HasSubstr("bias must be [D]"));
  EXPECT_THAT(error({a, b}, weight, scale, torch::Tensor()), HasSubstr("must be tensors"));
  EXPECT_THAT(error({a, b}, weight.to(torch::kDouble), scale, bias), HasSubstr("dtype"));
  EXPECT_THAT(error({a, b.to(torch::kDouble)}, weight, scale, bias), HasSubstr("share a dtype"));
  EXPECT_THAT(error({a.to(torch::kInt32), b.to(torch::kInt32)}, weight, scale, bias),
              HasSubstr("float or double"));
}

}  // namespace
}  // namespace grail::ops
