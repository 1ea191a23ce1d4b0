// Scoring requests of many concurrent callers with one model: dynamic batching.
//
// A caller hands over a list of facts of one graph snapshot and blocks until they are
// scored. The engine extracts their enclosing subgraphs on a pool of extraction threads and
// queues each subgraph for the model; one batcher thread takes queued subgraphs of *all*
// callers and runs them through the model as one disjoint-union forward. A batch closes
// when it holds `max_batch_size` subgraphs, when its oldest subgraph has waited
// `max_queue_delay`, or as soon as no extraction is in progress (waiting longer could only
// help if another request arrived, and the delay bound is for that case). This is how
// GPU serving systems earn their throughput, and on a CPU it still pays: one forward of 64
// subgraphs costs far less than 64 forwards of one.
//
// Scores do not depend on what else shares the batch: every subgraph is its own connected
// component of the batch, and the network only mixes nodes along edges and within a
// subgraph's own readout.
//
// Cancellation: each request carries a predicate (the RPC's deadline or cancellation);
// its facts not yet extracted or batched are dropped once it turns true.
//
// Thread safety: Score() may be called from any number of threads. The model must outlive
// the engine.
#ifndef GRAIL_SERVER_INFERENCE_ENGINE_H_
#define GRAIL_SERVER_INFERENCE_ENGINE_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/grail_model.h"
#include "model/subgraph_batch.h"
#include "storage/graph_view.h"
#include "storage/ids.h"

namespace grail {

struct EngineOptions {
  int max_batch_size = 256;  // subgraphs per forward
  std::chrono::microseconds max_queue_delay{2000};
  int extraction_threads = 2;
  // Extracted subgraphs waiting for the model, at most (extraction threads wait beyond it),
  // so a ranking over a huge graph holds a bounded number of subgraphs in memory.
  int max_queued_subgraphs = 2048;
};

// Hooks for metrics; every method is called from engine threads and must be cheap and
// thread-safe. The default implementation ignores everything.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // One subgraph extracted, and how long it took.
  virtual void OnSubgraphExtracted(int nodes, int edges, double seconds) {}
  // One forward: how many subgraphs, how long they had waited in the queue (the oldest),
  // and the forward's duration.
  virtual void OnBatch(int size, double oldest_wait_seconds, double forward_seconds) {}
};

// A fact to score, in the ids of the snapshot it is scored on. `model_relation` is the
// model's id of the relation; `graph_relation` is the graph's id of the same relation, or
// kNoGraphRelation if no fact of the graph uses it yet.
struct ScoringFact {
  EntityId head = 0;
  RelationId graph_relation = 0;
  EntityId tail = 0;
  int32_t model_relation = 0;
};
inline constexpr RelationId kNoGraphRelation = 0xffffffffu;

struct FactScore {
  float score = 0;
  int32_t subgraph_nodes = 0;
  int32_t subgraph_edges = 0;
  bool known_fact = false;  // whether the graph holds the fact itself
};

// What a request reads: a graph version and the map from its relation ids to the model's.
// Both are shared so that queued work keeps them alive.
struct ScoringGraph {
  std::shared_ptr<const GraphView> graph;
  std::shared_ptr<const RelationMap> relations;
};

class InferenceEngine {
 public:
  // Starts the extraction threads and the batcher. `observer` may be null.
  InferenceEngine(const GrailModel& model, const EngineOptions& options,
                  EngineObserver* observer = nullptr);
  // Stops the threads; requests still waiting fail with UNAVAILABLE.
  ~InferenceEngine();
  InferenceEngine(const InferenceEngine&) = delete;
  InferenceEngine& operator=(const InferenceEngine&) = delete;

  // Scores `facts` on `graph`; result i belongs to facts[i]. Blocks until every fact is
  // scored or `cancelled()` returns true (it is polled while waiting), in which case the
  // status is `cancelled_status`'s result. Errors: INVALID_ARGUMENT for a fact the
  // extraction or the model refuses (head == tail, id outside the graph); UNAVAILABLE after
  // Shutdown().
  absl::StatusOr<std::vector<FactScore>> Score(
      const ScoringGraph& graph, absl::Span<const ScoringFact> facts,
      const std::function<bool()>& cancelled,
      const std::function<absl::Status()>& cancelled_status);

  // Refuses new work, fails waiting requests with UNAVAILABLE and joins the threads.
  // Idempotent.
  void Shutdown();

  const EngineOptions& options() const { return options_; }

 private:
  struct Request;
  // A contiguous range of one request's facts for one extraction thread.
  struct ExtractionTask {
    std::shared_ptr<Request> request;
    size_t begin = 0, end = 0;
  };
  // One extracted subgraph waiting for the model.
  struct QueuedSubgraph {
    std::shared_ptr<Request> request;
    size_t index = 0;
    EnclosingSubgraph subgraph;
    std::chrono::steady_clock::time_point queued_at;
  };

  void ExtractionLoop();
  void BatcherLoop();
  // Runs one batch and hands the scores to their requests.
  void RunBatch(std::vector<QueuedSubgraph>& batch, SubgraphBatch& scratch,
                std::chrono::steady_clock::time_point now);

  const GrailModel& model_;
  const EngineOptions options_;
  EngineObserver default_observer_;
  EngineObserver* const observer_;

  std::mutex mu_;
  std::condition_variable extraction_ready_;  // tasks_ non-empty or stopping_
  std::condition_variable batch_ready_;       // queue_ changed or stopping_
  std::condition_variable queue_space_;       // queue_ shrank or stopping_
  std::deque<ExtractionTask> tasks_;
  std::deque<QueuedSubgraph> queue_;
  int extracting_ = 0;  // tasks taken by extraction threads and not finished
  bool stopping_ = false;

  std::vector<std::thread> extraction_threads_;
  std::thread batcher_;
};

}  // namespace grail

#endif  // GRAIL_SERVER_INFERENCE_ENGINE_H_
