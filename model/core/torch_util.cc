#include "model/core/torch_util.h"

#include <torch/cuda.h>

#include <cmath>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace grail {

absl::StatusOr<torch::Device> ParseDevice(absl::string_view name) {
  try {
    torch::Device device{std::string(name)};
    if (device.is_cuda() && !torch::cuda::is_available()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "device '", name, "' requested, but this LibTorch has no CUDA support or sees no GPU"));
    }
    return device;
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("bad device '", name, "': expected cpu or cuda[:N]"));
  }
}

torch::Tensor LinearInit(std::vector<int64_t> shape, int64_t fan_in) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
  return torch::empty(shape).uniform_(-bound, bound);
}

torch::Tensor Int64Tensor(const std::vector<int64_t>& values, const torch::Device& device) {
  return torch::from_blob(const_cast<int64_t*>(values.data()),
                          {static_cast<int64_t>(values.size())}, torch::kInt64)
      .to(device, /*non_blocking=*/false, /*copy=*/true);
}

}  // namespace grail
