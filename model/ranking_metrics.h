// The paper's metrics: AUC-PR over scored positives and negatives, and the rank of a true
// fact among its negatives for MRR and Hits@k.
#ifndef GRAIL_MODEL_RANKING_METRICS_H_
#define GRAIL_MODEL_RANKING_METRICS_H_

#include <cstdint>

#include "absl/types/span.h"

namespace grail {

// Area under the precision-recall curve as average precision (the definition of
// scikit-learn's average_precision_score, which the GraIL reference reports as AUC-PR):
// sum over distinct score thresholds, highest first, of (recall gain) x (precision there);
// tied scores enter together. Requires equal sizes; 0 if there is no positive.
double AveragePrecision(absl::Span<const float> scores, absl::Span<const uint8_t> is_positive);

// Rank (1 = best) of `positive` among `negatives`, ties broken by the mean of the
// optimistic and the pessimistic rank: 1 + #greater + #equal / 2. A positive tied with
// every negative therefore sits in the middle, never first by its position in the list.
double RankAmong(float positive, absl::Span<const float> negatives);

}  // namespace grail

#endif  // GRAIL_MODEL_RANKING_METRICS_H_
