// What grail-train shows a person while it trains, and the plot it can draw afterwards.
#ifndef GRAIL_TOOLS_TRAINING_PROGRESS_H_
#define GRAIL_TOOLS_TRAINING_PROGRESS_H_

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "train/training_report.h"

namespace grail {

// A one-line progress bar for a terminal: the epoch, a bar of positives done, steps/s and
// the epoch's ETA, redrawn in place at most every 0.2 s. Clear() erases it (before an
// epoch's summary line is printed).
class ProgressBar {
 public:
  ProgressBar(std::FILE* out, int epochs) : out_(out), epochs_(epochs) {}
  void Step(const StepReport& step);
  void Clear();
  // Another run's epochs from now on (grail-train --family best trains two models).
  void set_epochs(int epochs) { epochs_ = epochs; }

 private:
  std::FILE* const out_;
  int epochs_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_{};
};

// The text of the bar for `step` (no control characters), `width` characters of bar.
std::string ProgressLine(const StepReport& step, int epochs, int width = 30);

// An epoch's summary line: epoch, loss, its validation if it had one, seconds.
std::string EpochLine(const EpochReport& report, int epochs);

// OK if gnuplot can be run; FAILED_PRECONDITION saying how to install it otherwise.
absl::Status CheckPlotter();

// Draws loss and valid AUC-PR per epoch into a PNG with gnuplot (Debian's gnuplot-nox).
// FAILED_PRECONDITION if gnuplot is missing; INTERNAL if it fails.
absl::Status PlotTraining(const std::vector<EpochReport>& epochs, const std::string& png);

}  // namespace grail

#endif  // GRAIL_TOOLS_TRAINING_PROGRESS_H_
