#include "train/training_checkpoint.h"

#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "common/seeded_random.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

// What a trainer checkpoints: a model's parameters, an Adam over them, the best model so far
// and the two generators (order, negatives).
struct TinyRun {
  std::vector<torch::Tensor> parameters;
  std::unique_ptr<torch::optim::Adam> optimizer;
  std::unique_ptr<BestModel> best;
  SeededRandom order{1};
  SeededRandom negatives{2};

  explicit TinyRun(float start, torch::Device device = torch::kCPU) {
    parameters.push_back(torch::full({3, 2}, start, device).requires_grad_());
    parameters.push_back(torch::full({4}, -start, device).requires_grad_());
    optimizer = std::make_unique<torch::optim::Adam>(parameters, torch::optim::AdamOptions(0.1));
    best = std::make_unique<BestModel>(parameters);
  }
  // One Adam step, so that its state is not empty.
  void Step() {
    optimizer->zero_grad();
    (parameters[0].pow(2).sum() + parameters[1].sum()).backward();
    optimizer->step();
  }
  absl::Status Write(const TrainingCheckpoint& checkpoint, const TrainingPosition& at,
                     const std::string& key) const {
    return checkpoint.Write(at, key, parameters, *optimizer, *best, order, negatives);
  }
  absl::StatusOr<TrainingPosition> Restore(const TrainingCheckpoint& checkpoint,
                                           const std::string& key) {
    return checkpoint.Restore(key, parameters, *optimizer, *best, order, negatives);
  }
};

bool SameTensors(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!torch::equal(a[i].cpu(), b[i].cpu())) return false;
  }
  return true;
}

std::vector<torch::Tensor> Copy(const std::vector<torch::Tensor>& tensors) {
  std::vector<torch::Tensor> out;
  for (const torch::Tensor& t : tensors) out.push_back(t.detach().clone());
  return out;
}

TEST(TrainingCheckpointTest, RestoreGivesBackWhatWriteSaw) {
  ScopedTempDir dir;
  TinyRun written(1.0f);
  written.Step();
  ASSERT_TRUE(written.best->Offer(0.7, /*scheduled=*/true, written.parameters));
  written.Step();
  written.order.Uniform(100);
  written.negatives.Uniform(100);
  const TrainingCheckpoint checkpoint(dir.Sub("run"));
  ASSERT_TRUE(written.Write(checkpoint, {2, 14, {}}, "key").ok());

  TinyRun restored(9.0f);
  restored.order = SeededRandom(0);
  restored.negatives = SeededRandom(0);
  absl::StatusOr<TrainingPosition> at = restored.Restore(checkpoint, "key");
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->epoch, 2);
  EXPECT_EQ(at->steps, 14);
  EXPECT_TRUE(SameTensors(restored.parameters, written.parameters));
  EXPECT_EQ(restored.best->metric(), 0.7);
  EXPECT_TRUE(SameTensors(restored.best->tensors(), written.best->tensors()));
  EXPECT_EQ(restored.order.Uniform(1 << 30), written.order.Uniform(1 << 30));
  EXPECT_EQ(restored.negatives.Uniform(1 << 30), written.negatives.Uniform(1 << 30));
  // Adam's moments came back too: the next step is the same step.
  written.Step();
  restored.Step();
  EXPECT_TRUE(SameTensors(restored.parameters, written.parameters));
}

// A run begun on one device goes on on another: the checkpoint's tensors are read onto the
// model's device, Adam's moments included, so the next step is the same step. Needs a GPU.
TEST(TrainingCheckpointTest, ACheckpointResumesOnTheModelsDeviceNotTheWritersOne) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (const auto& [from, to] : {std::pair<torch::Device, torch::Device>{torch::kCPU, torch::kCUDA},
                                 {torch::kCUDA, torch::kCPU}}) {
    ScopedTempDir dir;
    TinyRun written(1.0f, from);
    written.Step();
    ASSERT_TRUE(written.best->Offer(0.7, /*scheduled=*/true, written.parameters));
    written.Step();
    const TrainingCheckpoint checkpoint(dir.Sub("run"));
    ASSERT_TRUE(written.Write(checkpoint, {2, 14, {}}, "key").ok());

    TinyRun restored(9.0f, to);
    absl::StatusOr<TrainingPosition> at = restored.Restore(checkpoint, "key");
    ASSERT_TRUE(at.ok()) << at.status();
    for (const torch::Tensor& t : restored.best->tensors()) EXPECT_EQ(t.device(), to);
    EXPECT_TRUE(SameTensors(restored.best->tensors(), written.best->tensors()));
    written.Step();
    restored.Step();  // throws if Adam's moments stayed on the writer's device
    for (size_t i = 0; i < written.parameters.size(); ++i) {
      EXPECT_EQ(restored.parameters[i].device(), to);
      EXPECT_TRUE(torch::allclose(restored.parameters[i].cpu(), written.parameters[i].cpu()));
    }
  }
}

TEST(TrainingCheckpointTest, NoCheckpointIsEpochZeroAndChangesNothing) {
  ScopedTempDir dir;
  TinyRun run(1.0f);
  const std::vector<torch::Tensor> before = Copy(run.parameters);
  absl::StatusOr<TrainingPosition> at = run.Restore(TrainingCheckpoint(dir.Sub("none")), "key");
  ASSERT_TRUE(at.ok()) << at.status();
  EXPECT_EQ(at->epoch, 0);
  EXPECT_TRUE(SameTensors(run.parameters, before));
}

TEST(TrainingCheckpointTest, AnotherRunsCheckpointIsRefused) {
  ScopedTempDir dir;
  TinyRun run(1.0f);
  const TrainingCheckpoint checkpoint(dir.Sub("run"));
  ASSERT_TRUE(run.Write(checkpoint, {1, 3, {}}, "seed=1").ok());
  absl::StatusOr<TrainingPosition> at = run.Restore(checkpoint, "seed=2");
  EXPECT_EQ(at.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(at.status().message(), HasSubstr("another run"));
}

TEST(TrainingCheckpointTest, ADamagedStateFileIsRefusedNotResumedFrom) {
  ScopedTempDir dir;
  TinyRun run(1.0f);
  const TrainingCheckpoint checkpoint(dir.Sub("run"));
  ASSERT_TRUE(run.Write(checkpoint, {1, 3, {}}, "key").ok());
  std::ofstream(checkpoint.StatePath(), std::ios::trunc) << "{\"epoch\": ";
  absl::StatusOr<TrainingPosition> at = run.Restore(checkpoint, "key");
  EXPECT_EQ(at.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(TrainingCheckpointTest, OnlyTheLatestCheckpointsFilesAreKept) {
  ScopedTempDir dir;
  TinyRun run(1.0f);
  const TrainingCheckpoint checkpoint(dir.Sub("run"));
  for (int epoch = 1; epoch <= 3; ++epoch) {
    run.Step();
    ASSERT_TRUE(run.Write(checkpoint, {epoch, epoch * 5, {}}, "key").ok());
  }
  int files_of_other_epochs = 0, files_of_the_last = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir.Sub("run"))) {
    const std::string name = entry.path().filename().string();
    if (name.find("-1.pt") != std::string::npos || name.find("-2.pt") != std::string::npos) {
      ++files_of_other_epochs;
    }
    if (name.find("-3.pt") != std::string::npos) ++files_of_the_last;
  }
  EXPECT_EQ(files_of_other_epochs, 0);
  EXPECT_GT(files_of_the_last, 0);
}

// The best model: scheduled validations make it; an off-schedule last epoch may be returned
// but is not kept (so a resume continues from the scheduled best).
TEST(BestModelTest, TheOffScheduleLastEpochIsReturnedButNotKept) {
  TinyRun run(1.0f);
  BestModel& best = *run.best;
  EXPECT_TRUE(best.Offer(0.5, /*scheduled=*/true, run.parameters));
  const std::vector<torch::Tensor> kept = Copy(best.tensors());
  run.Step();
  EXPECT_FALSE(best.Offer(0.4, /*scheduled=*/true, run.parameters));
  EXPECT_TRUE(SameTensors(best.tensors(), kept));
  EXPECT_TRUE(best.Offer(0.9, /*scheduled=*/false, run.parameters));
  EXPECT_EQ(best.metric(), 0.5);  // what a checkpoint keeps
  const std::vector<torch::Tensor> last = Copy(run.parameters);
  best.Apply(run.parameters);
  EXPECT_TRUE(SameTensors(run.parameters, last));  // the last epoch's, as it was the best
}

TEST(BestModelTest, ApplyGivesBackTheBestScheduledParameters) {
  TinyRun run(1.0f);
  ASSERT_TRUE(run.best->Offer(0.5, /*scheduled=*/true, run.parameters));
  const std::vector<torch::Tensor> best_first = Copy(run.parameters);
  run.Step();
  EXPECT_FALSE(run.best->Offer(0.3, /*scheduled=*/true, run.parameters));
  run.best->Apply(run.parameters);
  EXPECT_TRUE(SameTensors(run.parameters, best_first));
}

}  // namespace
}  // namespace grail
