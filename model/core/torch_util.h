// Small LibTorch helpers shared by the model families: devices, initialisation, index tensors.
// Archives are model/core/model_archive.h. Includes LibTorch: only model code includes it.
#ifndef GRAIL_MODEL_CORE_TORCH_UTIL_H_
#define GRAIL_MODEL_CORE_TORCH_UTIL_H_

#include <torch/script.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grail {

// "cpu" or "cuda[:N]". Errors: INVALID_ARGUMENT for another name; FAILED_PRECONDITION for
// CUDA when this LibTorch has none or sees no GPU.
absl::StatusOr<torch::Device> ParseDevice(absl::string_view name);

// torch.nn.Linear's default initialisation: U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
torch::Tensor LinearInit(std::vector<int64_t> shape, int64_t fan_in);

// `values` as an int64 tensor on `device` (copied).
torch::Tensor Int64Tensor(const std::vector<int64_t>& values, const torch::Device& device);

}  // namespace grail

#endif  // GRAIL_MODEL_CORE_TORCH_UTIL_H_
