// What the gRPC handlers report to the service's metrics, and what the metrics read of the
// service at scrape time: interfaces the handlers (server/rpc) implement and call, so that the
// metrics (server/metrics/server_metrics.h) need not know the handlers.
#ifndef GRAIL_SERVER_METRICS_SERVICE_OBSERVER_H_
#define GRAIL_SERVER_METRICS_SERVICE_OBSERVER_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "server/scoring/link_predictor.h"
#include "store/triple_store.h"

namespace grail {

// What the service reports to metrics; called on gRPC threads, must be thread-safe.
class ServiceObserver {
 public:
  virtual ~ServiceObserver() = default;
  // A finished call (for AddTriples: the stream) with its status code and duration.
  virtual void OnCall(absl::string_view method, int grpc_code, double seconds) {}
  // An acknowledged AddTriples chunk of `facts` facts and how long storing it took.
  virtual void OnChunkStored(const ChunkResult& result, size_t facts, double seconds) {}
  // Likewise for a RemoveTriples chunk.
  virtual void OnChunkRemoved(const ChunkResult& result, size_t facts, double seconds) {}
  // An ExportTriples page of `facts` facts sent.
  virtual void OnFactsExported(size_t facts) {}
  // `count` scores returned (ScoreTriplet(s) results, RankTails/RankHeads entries), all
  // produced by `scored_by`.
  virtual void OnScoresReturned(ScoredBy scored_by, size_t count) {}
  // A call answered from a propagation pruned to the budget (RankResponse.candidates_pruned,
  // ScoreTripletResponse.pruned): an approximate answer.
  virtual void OnPrunedAnswer() {}
  // A call refused at once because `limit` (e.g. "max_calls_in_flight") was reached.
  virtual void OnServiceLimit(absl::string_view limit) {}
  // A call's credentials checked (only with access tokens): `outcome` is
  // AccessDecision::outcome, `token_name` empty for an unknown or missing token.
  virtual void OnAccess(absl::string_view method, absl::string_view outcome,
                        absl::string_view token_name) {}
};

// The service's load, read at scrape time; thread-safe.
class ServiceLoad {
 public:
  virtual ~ServiceLoad() = default;
  // KnowledgeGraph calls and streams in progress (--max-calls-in-flight).
  virtual int64_t calls_in_flight() const = 0;
};

}  // namespace grail

#endif  // GRAIL_SERVER_METRICS_SERVICE_OBSERVER_H_
