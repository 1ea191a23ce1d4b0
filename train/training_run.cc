#include "train/training_run.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

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

absl::Status TrainingRun::Train(TrainingFamily& family, const TrainingSchedule& schedule,
                                const std::function<void(const EpochReport&)>& on_epoch,
                                const std::function<void(const StepReport&)>& on_step) {
  StepTrace trace(schedule.trace, schedule.cuda);
  int64_t steps_run = 0;  // by this call, over its epochs
  std::vector<uint32_t> order(family.examples());
  EpochProgress resumed = done_.within;  // of the first epoch this call runs
  const auto called = std::chrono::steady_clock::now();
  auto out_of_time = [&] {
    return schedule.time_budget_seconds > 0 &&
           std::chrono::duration<double>(std::chrono::steady_clock::now() - called).count() >=
               schedule.time_budget_seconds;
  };
  bool cut = false;
  for (int epoch = done_.epoch + 1; epoch <= schedule.epochs && !cut; ++epoch) {
    EpochProgress progress = std::exchange(resumed, EpochProgress{});
    const auto start = std::chrono::steady_clock::now() -
                       std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(progress.seconds));
    const SeededRandom order_at_start = order_random_;
    for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
    order_random_.Shuffle(order);
    absl::StatusOr<std::unique_ptr<EpochSteps>> steps =
        family.Epoch(epoch, order, progress.next, done_.steps);
    if (!steps.ok()) return steps.status();
    EpochReport report;
    report.epoch = epoch;
    while (true) {
      trace.BeforeStep(steps_run);
      absl::StatusOr<std::optional<StepOutcome>> outcome;
      try {
        outcome = (*steps)->Next();
      } catch (const c10::Error& e) {
        return absl::InternalError(
            absl::StrCat("training step failed: ", e.what_without_backtrace()));
      } catch (const std::exception& e) {  // the TorchScript interpreter's errors
        return absl::InternalError(absl::StrCat("training step failed: ", e.what()));
      }
      if (!outcome.ok()) return outcome.status();
      if (!outcome->has_value()) break;
      const StepOutcome& step = **outcome;
      progress.loss += step.summed_loss;
      progress.seen += step.positives;
      ++progress.steps;
      progress.next = step.end;
      ++steps_run;
      const int64_t run_steps = done_.steps + progress.steps;
      if (schedule.eval_every_steps > 0 && run_steps % schedule.eval_every_steps == 0) {
        if (absl::Status s = family.Validate(report, /*scheduled=*/true, run_steps); !s.ok()) {
          return s;
        }
      }
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (schedule.checkpoint_every_steps > 0 && step.end < static_cast<int64_t>(order.size()) &&
          progress.steps % schedule.checkpoint_every_steps == 0) {
        progress.seconds = seconds;
        std::optional<SeededRandom> after = (*steps)->NegativesAfterLastStep();
        const SeededRandom drawn = negative_random_;
        if (after) negative_random_ = *after;
        const absl::Status s = CheckpointWithin(progress, order_at_start);
        negative_random_ = drawn;
        if (!s.ok()) return s;
      }
      if (absl::Status s = trace.AfterStep(steps_run); !s.ok()) return s;
      if ((schedule.max_steps > 0 && progress.steps >= schedule.max_steps) || trace.finished()) {
        if (on_epoch) {
          report.positives = progress.seen;
          report.loss = progress.loss / static_cast<double>(std::max<int64_t>(1, progress.seen));
          report.seconds = seconds;
          on_epoch(report);
        }
        return absl::OkStatus();
      }
      if (on_step) {
        StepReport r;
        r.epoch = epoch;
        r.positives_done = progress.seen;
        r.positives_total = static_cast<int64_t>(order.size());
        r.steps_done = progress.steps;
        r.loss = step.loss;
        r.seconds = seconds;
        on_step(r);
      }
      if (out_of_time()) {
        cut = true;
        break;
      }
    }
    steps->reset();  // a family's threads for the epoch end before it does
    report.positives = progress.seen;
    report.cut = cut;
    absl::StatusOr<EpochReport> ended =
        EndEpoch(std::move(report), schedule, family, progress.steps, progress.loss, start);
    if (!ended.ok()) return ended.status();
    if (on_epoch) on_epoch(*ended);
  }
  best_.Apply(parameters_);
  return absl::OkStatus();
}

absl::StatusOr<EpochReport> TrainingRun::EndEpoch(EpochReport report,
                                                  const TrainingSchedule& schedule,
                                                  TrainingFamily& family, int64_t steps,
                                                  double total_loss,
                                                  std::chrono::steady_clock::time_point start) {
  const int epoch = report.epoch;
  report.loss = report.positives > 0 ? total_loss / static_cast<double>(report.positives) : 0;
  if (schedule.eval_every_steps == 0 &&
      (epoch % schedule.eval_every == 0 || epoch == schedule.epochs || report.cut)) {
    if (absl::Status s =
            family.Validate(report, epoch % schedule.eval_every == 0, done_.steps + steps);
        !s.ok()) {
      return s;
    }
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

absl::Status ValidateMrr(TrainingRun& run, EpochReport& report, bool scheduled, size_t valid_facts,
                         const std::function<absl::StatusOr<EvaluationResult>()>& evaluate) {
  double metric = 0;
  if (valid_facts > 0) {
    absl::StatusOr<EvaluationResult> result = evaluate();
    if (!result.ok()) return result.status();
    metric = result->full->mrr;
  }
  report.valid_mrr = metric;
  report.best = run.Offer(metric, scheduled);
  return absl::OkStatus();
}

}  // namespace grail
