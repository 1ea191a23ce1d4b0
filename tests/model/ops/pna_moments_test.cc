// grail::pna_moments against the six TorchScript operators it replaces in a PNA layer
// (mean = sum / count, std = sqrt(clamp(sum_sq / count - mean^2, 1e-6))): the same values
// forward and backward to the bit, float and double, one query's width and 64 folded
// together, rows whose variance is clamped; an output the loss does not use; argument errors.
#include "model/ops/pna_moments.h"

#include <torch/torch.h>

#include <ostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grail::ops {
namespace {

using ::testing::HasSubstr;

std::vector<torch::Tensor> Reference(const torch::Tensor& sum, const torch::Tensor& sum_sq,
                                     const torch::Tensor& count) {
  const torch::Tensor mean = sum / count;
  return {mean, (sum_sq / count - mean * mean).clamp(1e-6).sqrt()};
}

double RelativeError(const torch::Tensor& got, const torch::Tensor& expected) {
  return ((got - expected).abs().max() / expected.abs().max().clamp_min(1e-30)).item<double>();
}

struct Case {
  torch::ScalarType dtype;
  int64_t features;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << (c.dtype == torch::kFloat ? "float" : "double") << ", F = " << c.features;
}

class PnaMomentsMatchesTheScript : public ::testing::TestWithParam<Case> {};

TEST_P(PnaMomentsMatchesTheScript, ForwardAndBackward) {
  const Case c = GetParam();
  torch::manual_seed(7);
  const auto options = torch::TensorOptions().dtype(c.dtype);
  const int64_t V = 97;
  const torch::Tensor count = torch::randint(1, 60, {V, 1}, options);
  const torch::Tensor sum0 = torch::randn({V, c.features}, options) * count;
  torch::Tensor sum_sq0 = sum0 * sum0 / count + torch::rand({V, c.features}, options) * count;
  // Rows of one message or equal messages: the variance at (or rounding around) zero, clamped.
  sum_sq0.narrow(0, 0, 6).copy_(sum0.narrow(0, 0, 6).square() / count.narrow(0, 0, 6));
  const torch::Tensor weight = torch::randn({2, V, c.features}, options);
  std::vector<torch::Tensor> outs[2], grads[2];
  for (int fused = 0; fused < 2; ++fused) {
    const torch::Tensor sum = sum0.clone().requires_grad_(true);
    const torch::Tensor sum_sq = sum_sq0.clone().requires_grad_(true);
    outs[fused] = fused ? PnaMoments(sum, sum_sq, count) : Reference(sum, sum_sq, count);
    ((outs[fused][0] * weight[0]).sum() + (outs[fused][1] * weight[1]).sum()).backward();
    grads[fused] = {sum.grad(), sum_sq.grad()};
  }
  // Each value rounded as the script's operators round it.
  EXPECT_TRUE(torch::equal(outs[1][0], outs[0][0]));
  EXPECT_TRUE(torch::equal(outs[1][1], outs[0][1]));
  const torch::Tensor floor = torch::full({}, 1e-6, options).sqrt();
  EXPECT_GT((outs[0][1] == floor).sum().item<int64_t>(), 0) << "no variance was clamped";
  // The gradients too: the same terms added in autograd's order.
  EXPECT_TRUE(torch::equal(grads[1][0], grads[0][0])) << RelativeError(grads[1][0], grads[0][0]);
  EXPECT_TRUE(torch::equal(grads[1][1], grads[0][1])) << RelativeError(grads[1][1], grads[0][1]);
}

INSTANTIATE_TEST_SUITE_P(DtypesAndWidths, PnaMomentsMatchesTheScript,
                         ::testing::Values(Case{torch::kFloat, 32}, Case{torch::kFloat, 64 * 32},
                                           Case{torch::kDouble, 32}, Case{torch::kDouble, 64 * 32}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return std::string(info.param.dtype == torch::kFloat ? "Float"
                                                                                : "Double") +
                                  "Width" + std::to_string(info.param.features);
                         });

TEST(PnaMomentsTest, AnOutputTheLossDoesNotUseGivesNoGradientThroughIt) {
  torch::manual_seed(8);
  const torch::Tensor count = torch::randint(1, 9, {20, 1}, torch::kDouble);
  const torch::Tensor sum0 = torch::randn({20, 8}, torch::kDouble);
  const torch::Tensor sum_sq0 = sum0 * sum0 / count + 1.0;
  for (int used = 0; used < 2; ++used) {
    std::vector<torch::Tensor> grads[2];
    for (int fused = 0; fused < 2; ++fused) {
      const torch::Tensor sum = sum0.clone().requires_grad_(true);
      const torch::Tensor sum_sq = sum_sq0.clone().requires_grad_(true);
      const std::vector<torch::Tensor> out =
          fused ? PnaMoments(sum, sum_sq, count) : Reference(sum, sum_sq, count);
      out[used].sum().backward();
      grads[fused] = {sum.grad(), sum_sq.grad()};
    }
    for (int k = 0; k < 2; ++k) {
      if (!grads[0][k].defined()) {  // mean alone reaches sum only
        EXPECT_TRUE(!grads[1][k].defined() || grads[1][k].abs().max().item<double>() == 0);
        continue;
      }
      EXPECT_LE(RelativeError(grads[1][k], grads[0][k]), 1e-12) << "output " << used;
    }
  }
}

TEST(PnaMomentsTest, BadArgumentsAreRefusedWithWhatIsWrong) {
  const torch::Tensor sum = torch::randn({5, 4});
  const torch::Tensor count = torch::ones({5, 1});
  auto error = [](const torch::Tensor& a, const torch::Tensor& b, const torch::Tensor& n) {
    try {
      PnaMoments(a, b, n);
    } catch (const c10::Error& e) {
      return std::string(e.what_without_backtrace());
    }
    return std::string("accepted");
  };
  EXPECT_THAT(error(sum, torch::randn({5, 3}), count), HasSubstr("sum_sq must have sum's shape"));
  EXPECT_THAT(error(sum, sum, torch::ones({5})), HasSubstr("count must be [V, 1]"));
  EXPECT_THAT(error(sum, sum, torch::ones({4, 1})), HasSubstr("count must be [V, 1]"));
  EXPECT_THAT(error(sum, sum, count.to(torch::kDouble)), HasSubstr("share a dtype"));
  EXPECT_THAT(error(sum.to(torch::kInt64), sum.to(torch::kInt64), count.to(torch::kInt64)),
              HasSubstr("float or double"));
  EXPECT_THAT(error(sum.view(-1), sum.view(-1), count), HasSubstr("sum must be [V, F]"));
}

}  // namespace
}  // namespace grail::ops
