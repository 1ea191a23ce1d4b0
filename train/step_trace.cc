#include "train/step_trace.h"

#include <torch/csrc/autograd/profiler_kineto.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace grail {
namespace {

namespace profiler = torch::autograd::profiler;
using torch::profiler::impl::ActivityType;
using torch::profiler::impl::ProfilerConfig;
using torch::profiler::impl::ProfilerState;

}  // namespace

StepTrace::StepTrace(StepTraceOptions options, bool cuda)
    : options_(std::move(options)), cuda_(cuda) {}

StepTrace::~StepTrace() {
  if (open_) (void)Write();
}

void StepTrace::BeforeStep(int64_t done) {
  if (options_.path.empty() || open_ || written_ || done != options_.after) return;
  std::set<ActivityType> activities = {ActivityType::CPU};
  if (cuda_) activities.insert(ActivityType::CUDA);
  const ProfilerConfig config(ProfilerState::KINETO);
  profiler::prepareProfiler(config, activities);
  profiler::enableProfiler(config, activities);
  open_ = true;
}

absl::Status StepTrace::AfterStep(int64_t done) {
  if (!open_ || done < options_.after + options_.steps) return absl::OkStatus();
  return Write();
}

absl::Status StepTrace::Write() {
  open_ = false;
  written_ = true;
  const std::string failed = absl::StrCat("no trace written to ", options_.path, ": ");
  try {
    std::unique_ptr<profiler::ProfilerResult> result = profiler::disableProfiler();
    if (result) result->save(options_.path);
  } catch (const c10::Error& e) {
    // Debian's LibTorch: "Saving a trace requires using torch.profiler with Kineto support".
    return absl::FailedPreconditionError(
        absl::StrCat(failed, e.what_without_backtrace(), " (a PyTorch's own LibTorch has Kineto)"));
  }
  std::error_code error;
  const std::uintmax_t bytes = std::filesystem::file_size(options_.path, error);
  if (error) return absl::InternalError(absl::StrCat(failed, error.message()));
  if (bytes == 0) return absl::InternalError(absl::StrCat(failed, "the profiler saved nothing"));
  return absl::OkStatus();
}

}  // namespace grail
