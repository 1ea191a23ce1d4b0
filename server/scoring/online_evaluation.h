// The served model's accuracy on the facts users add, measured as the benchmarks measure it
// (prequential evaluation): a sample of each AddTriples chunk's facts is ranked against every
// entity, filtered, in both directions, on the snapshot the chunk arrives at, before it is
// applied; the answers' ranks feed the metrics (a rank histogram, MRR and Hits@10 over a
// sliding window of the last ranks, per model version).
//
// Off the request's critical path: the rankings are the engine's jobs like any call's (an
// AddTriples chunk waits for none of them), and their share of the time is bounded: after a
// chunk's rankings took d seconds, none starts for d * (1 / cpu_share - 1) seconds, and a
// chunk that arrives meanwhile, or while rankings are in flight, is not sampled (counted as
// skipped, "busy"). A fact whose head or tail the graph lacks (a new entity) cannot be ranked
// and is counted apart, as is one the graph holds already or whose relation the model cannot
// score. Ranks count only once the chunk is stored: a refused chunk's are dropped.
#ifndef GRAIL_SERVER_SCORING_ONLINE_EVALUATION_H_
#define GRAIL_SERVER_SCORING_ONLINE_EVALUATION_H_

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/seeded_random.h"
#include "graph/triple_file.h"
#include "server/scoring/link_predictor.h"

namespace grail {

struct OnlineEvalOptions {
  double rate = 0;                  // share of the added facts ranked, in [0, 1]; 0: off
  double cpu_share = 0.1;           // in (0, 1]: the rankings' busy time over the wall time
  size_t window = 1000;             // the last ranks (each direction one) MRR and Hits@10 average
  size_t max_facts_per_chunk = 64;  // sampled from one chunk, at most (a uniform subset)
  uint64_t seed = 0;
};

// What the evaluation reports (ServerMetrics).
class OnlineEvalObserver {
 public:
  virtual ~OnlineEvalObserver() = default;
  // One answer's rank by `model_version`, and its window's figures after it.
  virtual void OnOnlineRank(const std::string& model_version, double rank, double window_mrr,
                            double window_hits_at_10, size_t window_ranks) = 0;
  // `queries` (a sampled fact's tail and head query each) not ranked, and why: busy (the
  // duty cycle's pause or rankings in flight), new_entity (the graph lacks its head or tail),
  // known (the graph holds the fact), unscorable (a relation the model cannot score, or head
  // = tail), dropped (its chunk was refused) or error (the engine's).
  virtual void OnOnlineSkipped(const std::string& reason, size_t queries) = 0;
};

// The last `size` ranks of one model version.
class RankWindow {
 public:
  explicit RankWindow(size_t size) : size_(size) {}
  void Add(double rank);
  double mrr() const { return ranks_.empty() ? 0 : reciprocal_sum_ / ranks_.size(); }
  double hits_at_10() const {
    return ranks_.empty() ? 0 : static_cast<double>(hits_) / ranks_.size();
  }
  size_t count() const { return ranks_.size(); }

 private:
  const size_t size_;
  std::deque<double> ranks_;
  double reciprocal_sum_ = 0;
  size_t hits_ = 0;
};

class OnlineEvaluator {
 public:
  // `predictor` and `observer` must outlive it and every ranking it starts.
  OnlineEvaluator(const LinkPredictor& predictor, OnlineEvalOptions options,
                  OnlineEvalObserver* observer);
  // Waits for the rankings in flight (the engine must still run them).
  ~OnlineEvaluator();

  // One chunk's sampled facts, ranked while it is applied.
  class Chunk;
  // On the writer thread, before a chunk of `facts` is applied: samples and starts their
  // rankings on the graph as it is. Null when nothing was sampled.
  std::shared_ptr<Chunk> BeforeApply(absl::Span<const NamedTriple> facts);
  // After it: whether the chunk was stored. Its ranks are reported once both this and every
  // ranking are done.
  void AfterApply(const std::shared_ptr<Chunk>& chunk, bool stored);

  // Rankings in flight: zero once every started one ended (reported or not: a chunk's ranks
  // wait for its AfterApply).
  int64_t in_flight() const;

 private:
  friend class Chunk;
  // Every ranking of `chunk` and its outcome are in: its ranks are reported.
  void Finished(Chunk& chunk);
  // One ranking ended (after its chunk's part in it).
  void RankingEnded();

  const LinkPredictor& predictor_;
  const OnlineEvalOptions options_;
  OnlineEvalObserver* const observer_;
  mutable absl::Mutex mu_;
  SeededRandom random_ ABSL_GUARDED_BY(mu_);
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::chrono::steady_clock::time_point next_start_ ABSL_GUARDED_BY(mu_){};
  // Per model version; at most a few (the oldest is dropped).
  std::map<std::string, RankWindow> windows_ ABSL_GUARDED_BY(mu_);
  std::deque<std::string> versions_ ABSL_GUARDED_BY(mu_);
};

}  // namespace grail

#endif  // GRAIL_SERVER_SCORING_ONLINE_EVALUATION_H_
