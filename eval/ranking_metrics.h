// The paper's metrics: AUC-PR over scored positives and negatives, and the rank of a true
// fact among its negatives for MRR and Hits@k.
#ifndef GRAIL_EVAL_RANKING_METRICS_H_
#define GRAIL_EVAL_RANKING_METRICS_H_

#include <cmath>
#include <cstdint>

#include "absl/types/span.h"

namespace grail {

// Area under the precision-recall curve as average precision (the definition of
// scikit-learn's average_precision_score, which the GraIL reference reports as AUC-PR):
// sum over distinct score thresholds, highest first, of (recall gain) x (precision there);
// tied scores enter together. Requires equal sizes; 0 if there is no positive.
double AveragePrecision(absl::Span<const float> scores, absl::Span<const uint8_t> is_positive);

// Area under the ROC curve (scikit-learn's roc_auc_score, the "auc" the GraIL reference
// code selects its model on): the chance that a positive outscores a negative, a tie
// counting one half. Requires equal sizes; 0 without a positive or without a negative.
double RocAuc(absl::Span<const float> scores, absl::Span<const uint8_t> is_positive);

// How rankings order scores: NaN, what a diverged model gives, is the lowest score, below
// every number and level with another NaN, so a NaN answer ranks behind every candidate that
// has a score (as the server ranks: server/scoring/ranking.h) rather than first, which every
// comparison being false would make it.
inline bool ScoresAbove(float candidate, float answer) {
  return std::isnan(answer) ? !std::isnan(candidate) : candidate > answer;
}
inline bool ScoresLevel(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }

// Rank (1 = best) of `positive` among `negatives`, ties broken by the mean of the
// optimistic and the pessimistic rank: 1 + #greater + #equal / 2 (in ScoresAbove's order).
// A positive tied with every negative therefore sits in the middle, never first by its
// position in the list.
double RankAmong(float positive, absl::Span<const float> negatives);

// The expected Hits@k had the positive been ranked among `samples` negatives drawn uniformly
// (with replacement) from the `candidates` filtered non-answers, given its full filtered
// `rank` among them: with p = (rank - 1) / candidates the chance that one sample outranks
// it, P(Binomial(samples, p) < k). This is NBFNet's "HITS@10 (50 sample)" (k = 10,
// samples = 50), the figure its README reports on GraIL's inductive splits; it reads the
// sampled protocol off one full ranking, without the noise of one draw. 0 if candidates = 0
// and rank > k, 1 if candidates = 0 otherwise.
double ExpectedHitsAmongSamples(double rank, int64_t candidates, int k, int samples);

}  // namespace grail

#endif  // GRAIL_EVAL_RANKING_METRICS_H_
