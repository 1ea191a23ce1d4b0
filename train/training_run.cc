#include "train/training_run.h"

#include <utility>

namespace grail {

TrainingRun::TrainingRun(std::vector<torch::Tensor> parameters,
                         const torch::optim::AdamOptions& adam, uint64_t seed,
                         uint64_t negative_salt, const std::string& checkpoint_dir,
                         std::string run_key)
    : parameters_(std::move(parameters)),
      optimizer_(parameters_, adam),
      order_random_(seed),
      negative_random_(MixBits(seed ^ negative_salt)),
      best_(parameters_),
      checkpoint_(checkpoint_dir),
      run_key_(std::move(run_key)) {}

absl::Status TrainingRun::Resume() {
  absl::StatusOr<TrainingPosition> restored = checkpoint_.Restore(
      run_key_, parameters_, optimizer_, best_, order_random_, negative_random_);
  if (!restored.ok()) return restored.status();
  done_ = *restored;
  return absl::OkStatus();
}

absl::Status TrainingRun::CheckpointWithin(const EpochProgress& progress,
                                           const SeededRandom& order_at_start) {
  if (checkpoint_.dir().empty()) return absl::OkStatus();
  TrainingPosition at = done_;
  at.within = progress;
  return checkpoint_.Write(at, run_key_, parameters_, optimizer_, best_, order_at_start,
                           negative_random_);
}

absl::StatusOr<EpochReport> TrainingRun::EndEpoch(EpochReport report, int epochs, int eval_every,
                                                  int64_t steps, double total_loss,
                                                  const Validation& validate,
                                                  std::chrono::steady_clock::time_point start) {
  const int epoch = report.epoch;
  report.loss = report.positives > 0 ? total_loss / static_cast<double>(report.positives) : 0;
  if (validate && (epoch % eval_every == 0 || epoch == epochs)) {
    if (absl::Status s = validate(report, epoch % eval_every == 0); !s.ok()) return s;
  }
  done_ = {epoch, done_.steps + steps, {}};
  if (!checkpoint_.dir().empty()) {
    if (absl::Status s = checkpoint_.Write(done_, run_key_, parameters_, optimizer_, best_,
                                           order_random_, negative_random_);
        !s.ok()) {
      return s;
    }
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return report;
}

TrainingRun::Validation MrrValidation(TrainingRun& run, size_t valid_facts,
                                      std::function<absl::StatusOr<EvaluationResult>()> evaluate) {
  return [&run, valid_facts, evaluate = std::move(evaluate)](EpochReport& report,
                                                             bool scheduled) -> absl::Status {
    double metric = 0;
    if (valid_facts > 0) {
      absl::StatusOr<EvaluationResult> result = evaluate();
      if (!result.ok()) return result.status();
      metric = result->full->mrr;
    }
    report.valid_mrr = metric;
    report.best = run.Offer(metric, scheduled);
    return absl::OkStatus();
  };
}

}  // namespace grail
