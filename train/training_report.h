// What a training run reports as it goes, whatever the family: each epoch, each step, each
// validation; and the fingerprint that ties a model to the facts it was trained on.
#ifndef GRAIL_TRAIN_TRAINING_REPORT_H_
#define GRAIL_TRAIN_TRAINING_REPORT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "graph/triple_file.h"

namespace grail {

// One validation of a GraIL training run: AUC-PR and ROC-AUC on the valid facts, each with
// one negative drawn from the seed options.seed + 1 (the same negatives every time).
struct Validation {
  int64_t step = 0;  // steps of the run before it
  double auc_pr = 0;
  double auc_roc = 0;
  bool best = false;  // the best model so far on the selected metric (ties: the later)
};

struct EpochReport {
  int epoch = 0;                        // 1-based
  double loss = 0;                      // mean per positive
  std::vector<Validation> validations;  // GraIL: every validation of this epoch, in order
  std::optional<double> valid_mrr;      // the path family's validation, if the epoch had one
  bool best = false;                    // a validation of this epoch found the best so far
  double seconds = 0;
  int64_t positives = 0;
  bool cut = false;  // the run's time budget ended the epoch before its order did
};

// Progress within an epoch, after each training step.
struct StepReport {
  int epoch = 0;                // 1-based
  int64_t positives_done = 0;   // this epoch so far
  int64_t positives_total = 0;  // this epoch's positives
  int64_t steps_done = 0;       // this epoch so far
  double loss = 0;              // this step's, per positive
  double seconds = 0;           // since the epoch started
};

// A fingerprint of a fact list (FNV-1a 64 over the facts in order), stored in the model.
std::string FingerprintFacts(absl::Span<const NamedTriple> facts);

}  // namespace grail

#endif  // GRAIL_TRAIN_TRAINING_REPORT_H_
