#include "server/inference_engine.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"

namespace grail {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsSince(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// How often a waiting caller re-checks its cancellation predicate.
constexpr std::chrono::milliseconds kCancellationPoll{5};

}  // namespace

struct InferenceEngine::Request {
  ScoringGraph graph;
  std::vector<ScoringFact> facts;
  // Set once the caller stopped waiting or the request failed: its remaining work is
  // dropped by the extraction threads and the batcher.
  std::atomic<bool> abandoned{false};

  std::mutex mu;
  std::condition_variable done;
  std::vector<FactScore> results;  // guarded by mu
  size_t remaining = 0;            // guarded by mu
  absl::Status error;              // guarded by mu

  void Fail(absl::Status status) {
    {
      std::lock_guard<std::mutex> lock(mu);
      if (error.ok()) error = std::move(status);
    }
    abandoned.store(true, std::memory_order_relaxed);
    done.notify_all();
  }
};

InferenceEngine::InferenceEngine(const GrailModel& model, const EngineOptions& options,
                                 EngineObserver* observer)
    : model_(model),
      options_(options),
      observer_(observer != nullptr ? observer : &default_observer_) {
  const int extraction_threads = std::max(1, options_.extraction_threads);
  for (int i = 0; i < extraction_threads; ++i) {
    extraction_threads_.emplace_back([this] { ExtractionLoop(); });
  }
  batcher_ = std::thread([this] { BatcherLoop(); });
}

InferenceEngine::~InferenceEngine() { Shutdown(); }

void InferenceEngine::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !batcher_.joinable()) return;
    stopping_ = true;
  }
  extraction_ready_.notify_all();
  batch_ready_.notify_all();
  queue_space_.notify_all();
  for (std::thread& t : extraction_threads_) {
    if (t.joinable()) t.join();
  }
  if (batcher_.joinable()) batcher_.join();
  // Whatever is left belongs to callers still waiting: release them.
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Status stopped = absl::UnavailableError("the server is shutting down");
  for (ExtractionTask& task : tasks_) task.request->Fail(stopped);
  for (QueuedSubgraph& item : queue_) item.request->Fail(stopped);
  tasks_.clear();
  queue_.clear();
}

absl::StatusOr<std::vector<FactScore>> InferenceEngine::Score(
    const ScoringGraph& graph, absl::Span<const ScoringFact> facts,
    const std::function<bool()>& cancelled, const std::function<absl::Status()>& cancelled_status) {
  if (facts.empty()) return std::vector<FactScore>();
  auto request = std::make_shared<Request>();
  request->graph = graph;
  request->facts.assign(facts.begin(), facts.end());
  request->results.resize(facts.size());
  request->remaining = facts.size();

  // Split the facts so that every extraction thread gets a share and the first batch can
  // start before the last subgraph is extracted.
  const size_t threads = extraction_threads_.size();
  const size_t per_task =
      std::clamp<size_t>((facts.size() + 2 * threads - 1) / (2 * threads), 1, 64);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return absl::UnavailableError("the server is shutting down");
    for (size_t begin = 0; begin < facts.size(); begin += per_task) {
      tasks_.push_back(ExtractionTask{request, begin, std::min(facts.size(), begin + per_task)});
    }
  }
  extraction_ready_.notify_all();

  std::unique_lock<std::mutex> lock(request->mu);
  while (request->remaining > 0 && request->error.ok()) {
    request->done.wait_for(lock, kCancellationPoll);
    if (request->remaining > 0 && request->error.ok() && cancelled()) {
      request->abandoned.store(true, std::memory_order_relaxed);
      return cancelled_status();
    }
  }
  if (!request->error.ok()) return request->error;
  return std::move(request->results);
}

void InferenceEngine::ExtractionLoop() {
  SubgraphExtractor extractor(model_.config().extraction());
  std::vector<QueuedSubgraph> extracted;
  for (;;) {
    ExtractionTask task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      extraction_ready_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
      if (stopping_) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
      ++extracting_;
    }
    Request& request = *task.request;
    const GraphView& graph = *request.graph.graph;
    extracted.clear();
    for (size_t i = task.begin; i < task.end; ++i) {
      if (request.abandoned.load(std::memory_order_relaxed)) break;
      const ScoringFact& fact = request.facts[i];
      const Clock::time_point start = Clock::now();
      QueuedSubgraph item;
      absl::Status status = extractor.Extract(graph, fact.head, fact.graph_relation, fact.tail,
                                              /*hide_target_fact=*/false, &item.subgraph);
      if (!status.ok()) {
        request.Fail(absl::InvalidArgumentError(absl::StrCat("fact ", i, ": ", status.message())));
        break;
      }
      item.queued_at = Clock::now();
      observer_->OnSubgraphExtracted(item.subgraph.num_nodes(), item.subgraph.num_edges(),
                                     SecondsSince(start, item.queued_at));
      item.request = task.request;
      item.index = i;
      extracted.push_back(std::move(item));
    }
    {
      std::unique_lock<std::mutex> lock(mu_);
      // Back-pressure: wait for the batcher to make room (it always can: it never waits
      // for extraction threads while the queue holds a full batch).
      const size_t max_queued = static_cast<size_t>(
          std::max(options_.max_queued_subgraphs, std::max(1, options_.max_batch_size)));
      queue_space_.wait(lock, [&] { return stopping_ || queue_.size() < max_queued; });
      for (QueuedSubgraph& item : extracted) queue_.push_back(std::move(item));
      --extracting_;
    }
    batch_ready_.notify_one();
  }
}

void InferenceEngine::BatcherLoop() {
  const size_t max_batch = static_cast<size_t>(std::max(1, options_.max_batch_size));
  std::vector<QueuedSubgraph> batch;
  SubgraphBatch scratch;
  for (;;) {
    batch.clear();
    {
      std::unique_lock<std::mutex> lock(mu_);
      batch_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      // Let the batch fill while more subgraphs are on their way, up to the delay bound.
      const Clock::time_point close_at = queue_.front().queued_at + options_.max_queue_delay;
      while (!stopping_ && queue_.size() < max_batch && (extracting_ > 0 || !tasks_.empty()) &&
             Clock::now() < close_at) {
        batch_ready_.wait_until(lock, close_at);
      }
      if (stopping_) return;
      while (!queue_.empty() && batch.size() < max_batch) {
        if (!queue_.front().request->abandoned.load(std::memory_order_relaxed)) {
          batch.push_back(std::move(queue_.front()));
        }
        queue_.pop_front();
      }
    }
    queue_space_.notify_all();
    if (!batch.empty()) RunBatch(batch, scratch, Clock::now());
  }
}

void InferenceEngine::RunBatch(std::vector<QueuedSubgraph>& batch, SubgraphBatch& scratch,
                               Clock::time_point now) {
  scratch.Clear();
  Clock::time_point oldest = now;
  for (const QueuedSubgraph& item : batch) {
    const ScoringFact& fact = item.request->facts[item.index];
    scratch.Add(item.subgraph, fact.model_relation, *item.request->graph.relations);
    oldest = std::min(oldest, item.queued_at);
  }
  const Clock::time_point start = Clock::now();
  absl::StatusOr<std::vector<float>> scores = model_.Score(scratch);
  observer_->OnBatch(static_cast<int>(batch.size()), SecondsSince(oldest, now),
                     SecondsSince(start, Clock::now()));
  for (size_t b = 0; b < batch.size(); ++b) {
    Request& request = *batch[b].request;
    if (!scores.ok()) {
      request.Fail(scores.status());
      continue;
    }
    const EnclosingSubgraph& subgraph = batch[b].subgraph;
    bool finished;
    {
      std::lock_guard<std::mutex> lock(request.mu);
      request.results[batch[b].index] = FactScore{(*scores)[b], subgraph.num_nodes(),
                                                  subgraph.num_edges(), subgraph.target_in_graph};
      finished = --request.remaining == 0;
    }
    if (finished) request.done.notify_all();
  }
  batch.clear();  // drops the batch's references to requests and graphs now
}

}  // namespace grail
