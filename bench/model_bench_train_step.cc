// The LibTorch half of bench/model_bench.cc, kept apart so the harness itself compiles
// without LibTorch headers.
#include "model/grail/grail_model.h"
#include "model/grail/grail_module.h"

namespace grail {

double TrainingStep(GrailModel& model, const SubgraphBatch& batch, int64_t positives) {
  torch::Tensor scores = Forward(model.module(), batch, /*training=*/true);
  torch::Tensor loss =
      torch::clamp_min(
          scores.slice(0, positives, 2 * positives) - scores.slice(0, 0, positives) + 10, 0)
          .sum();
  loss.backward();
  return loss.item<double>();
}

}  // namespace grail
