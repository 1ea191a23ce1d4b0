#include "model/torch_util.h"

#include <torch/cuda.h>

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "model/archive_check.h"

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

absl::StatusOr<torch::jit::Module> LoadModelArchive(const std::string& path,
                                                    const torch::Device& device) {
  if (absl::Status container = CheckModelArchive(path); !container.ok()) return container;
  try {
    return torch::jit::load(path, device);
  } catch (const c10::Error& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot load model ", path, ": ", e.what_without_backtrace()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("cannot load model ", path, ": ", e.what()));
  }
}

std::string ArchiveFormat(const torch::jit::Module& module) {
  return module.hasattr("format") ? module.attr("format").toStringRef() : "";
}

std::vector<std::string> ArchiveRelations(const torch::jit::Module& module) {
  std::vector<std::string> relations;
  for (const c10::IValue& name : module.attr("relations").toListRef()) {
    relations.push_back(name.toStringRef());
  }
  return relations;
}

absl::Status SaveModelArchive(torch::jit::Module& module, const std::string& fingerprint,
                              const std::string& path) {
  try {
    module.setattr("training_fingerprint", fingerprint);
    module.save(path);
    return absl::OkStatus();
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("cannot save model to ", path, ": ", e.what_without_backtrace()));
  }
}

int64_t CountParameters(const torch::jit::Module& module) {
  int64_t n = 0;
  for (const torch::Tensor& p : module.parameters()) n += p.numel();
  return n;
}

absl::Status CheckFiniteParameters(const torch::jit::Module& module, const std::string& path) {
  for (const auto& p : module.named_parameters()) {
    const int64_t bad = (~torch::isfinite(p.value)).sum().item<int64_t>();
    if (bad > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": parameter ", p.name, " holds ", bad,
                       " NaN or Inf value(s): the training diverged or the archive is damaged"));
    }
  }
  return absl::OkStatus();
}

}  // namespace grail
