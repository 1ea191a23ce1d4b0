// A window of training steps profiled with LibTorch's profiler (Kineto), written as a Chrome
// trace (chrome://tracing, ui.perfetto.dev; bench/step_trace.py sums it up): every operator
// the host runs, on the training thread and autograd's, and on a GPU every kernel and copy
// with the operator that launched it. What an epoch's seconds cannot say: where a step's time
// goes, on the host and on the device.
#ifndef GRAIL_TRAIN_STEP_TRACE_H_
#define GRAIL_TRAIN_STEP_TRACE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace grail {

struct StepTraceOptions {
  std::string path;    // empty: nothing is traced
  int64_t after = 10;  // steps run untraced first (the TorchScript executor's warm-up)
  int64_t steps = 5;   // steps traced
};

class StepTrace {
 public:
  // `cuda`: trace the GPU's kernels too.
  StepTrace(StepTraceOptions options, bool cuda);
  ~StepTrace();  // a window still open (the run ended inside it) is written
  StepTrace(const StepTrace&) = delete;
  StepTrace& operator=(const StepTrace&) = delete;

  // Before each step, with the steps this run has done: opens the window at `after`.
  void BeforeStep(int64_t done);
  // After each step: closes the window once `steps` were traced and writes the trace. A
  // LibTorch built without Kineto (Debian's) profiles nothing it can write: an error says so.
  absl::Status AfterStep(int64_t done);
  // Whether the window was traced and written: the run stops there.
  bool finished() const { return written_; }

 private:
  absl::Status Write();

  StepTraceOptions options_;
  bool cuda_;
  bool open_ = false;
  bool written_ = false;
};

}  // namespace grail

#endif  // GRAIL_TRAIN_STEP_TRACE_H_
