#include "tools/training_progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace grail {

std::string ProgressLine(const StepReport& step, int epochs, int width) {
  const double fraction = step.positives_total > 0
                              ? static_cast<double>(step.positives_done) / step.positives_total
                              : 0;
  const int filled = static_cast<int>(std::lround(fraction * width));
  const double rate = step.seconds > 0 ? step.steps_done / step.seconds : 0;
  const double left = fraction > 0 ? step.seconds * (1 - fraction) / fraction : 0;
  const int left_seconds = static_cast<int>(std::lround(left));
  return absl::StrFormat("epoch %d/%d [%s%s] %d/%d  %.1f steps/s  ETA %d:%02d", step.epoch, epochs,
                         std::string(filled, '#'), std::string(width - filled, '.'),
                         step.positives_done, step.positives_total, rate, left_seconds / 60,
                         left_seconds % 60);
}

void ProgressBar::Step(const StepReport& step) {
  const auto now = std::chrono::steady_clock::now();
  const bool last = step.positives_done >= step.positives_total;
  if (shown_ && !last && now - last_ < std::chrono::milliseconds(200)) return;
  last_ = now;
  shown_ = true;
  std::fprintf(out_, "\r\033[K%s", ProgressLine(step, epochs_).c_str());
  std::fflush(out_);
}

void ProgressBar::Clear() {
  if (!shown_) return;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
  shown_ = false;
}

std::string EpochLine(const EpochReport& report, int epochs) {
  std::string valid;
  if (!report.validations.empty()) {
    // The epoch's last validation; with several (a step schedule), how many.
    const Validation& last = report.validations.back();
    valid = absl::StrFormat("  valid_auc_pr %.4f  valid_auc_roc %.4f%s", last.auc_pr, last.auc_roc,
                            report.best ? " (best)" : "");
    if (report.validations.size() > 1) {
      absl::StrAppend(&valid, "  (", report.validations.size(), " validations)");
    }
  } else if (report.valid_mrr) {
    valid = absl::StrFormat("  valid_mrr %.4f%s", *report.valid_mrr, report.best ? " (best)" : "");
  }
  return absl::StrFormat("epoch %d/%d  loss %.4f%s  %.1f s%s", report.epoch, epochs, report.loss,
                         valid, report.seconds,
                         report.cut ? "  (cut by the time budget: the run ends here)" : "");
}

absl::Status CheckPlotter() {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    return absl::FailedPreconditionError(
        "--plot needs gnuplot (Debian: apt-get install gnuplot-nox)");
  }
  return absl::OkStatus();
}

absl::Status PlotTraining(const std::vector<EpochReport>& epochs, const std::string& png) {
  if (absl::Status s = CheckPlotter(); !s.ok()) return s;
  const std::string data = png + ".dat";
  // GraIL validates on AUC-PR, the path family on filtered MRR.
  const bool mrr = std::any_of(epochs.begin(), epochs.end(),
                               [](const EpochReport& e) { return e.valid_mrr.has_value(); });
  const char* metric_column = mrr ? "valid_mrr" : "valid_auc_pr";
  const char* metric_title = mrr ? "valid MRR" : "valid AUC-PR";
  {
    std::ofstream out(data);
    out << "# epoch loss " << metric_column << "\n";
    for (const EpochReport& e : epochs) {
      out << e.epoch << ' ' << e.loss << ' ';
      // GraIL: the epoch's last validation.
      const std::optional<double> metric = mrr ? e.valid_mrr
                                           : e.validations.empty()
                                               ? std::nullopt
                                               : std::optional<double>(e.validations.back().auc_pr);
      if (metric) {
        out << *metric;
      } else {
        out << "NaN";  // gnuplot skips it
      }
      out << '\n';
    }
  }
  const std::string script = png + ".gp";
  {
    std::ofstream out(script);
    out << "set terminal pngcairo size 900,500\n"
        << "set output '" << png << "'\n"
        << "set title 'grail-train'\nset xlabel 'epoch'\nset grid\n"
        << "set ylabel 'loss (mean per positive)'\nset y2label '" << metric_title << "'\n"
        << "set ytics nomirror\nset y2tics\nset y2range [0:1]\nset key bottom left\n"
        << "set datafile missing 'NaN'\n"
        << (epochs.size() <= 20 ? "set xtics 1\n" : "") << "plot '" << data
        << "' using 1:2 with linespoints title 'loss' axes x1y1, \\\n"
        << "     '" << data << "' using 1:3 with linespoints title '" << metric_title
        << "' axes x1y2\n";
  }
  const int status = std::system(absl::StrCat("gnuplot '", script, "' 2>&1").c_str());
  std::filesystem::remove(script);
  std::filesystem::remove(data);
  if (status != 0 || !std::filesystem::exists(png)) {
    return absl::InternalError(absl::StrCat("gnuplot could not draw ", png));
  }
  return absl::OkStatus();
}

}  // namespace grail
