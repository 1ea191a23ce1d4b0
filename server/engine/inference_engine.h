// Scoring the work of many concurrent calls with one model: a fair, deadline-aware,
// bounded scheduler in front of dynamic batching.
//
// A call hands the engine a ScoringJob (its work, produced by the domain logic) and a
// CallControl (its deadline and cancellation), and is told the outcome through the job's
// Finish(); no thread waits for it meanwhile. Inside, a pool of extraction threads turns the
// job's items into WorkItems (a fact's enclosing subgraph, a query's neighbourhood: the engine
// does not look inside, it reads their cost) and one batcher thread hands queued items of
// *all* calls to the model's BatchRunner, which runs them as one forward.
//
// The engine knows no model family. A family supplies its job types (which extract items)
// and its runner (which runs a batch of them and hands each job its results); items of one
// runner only share a forward. Adding a family adds those, never code here.
//
// Policies, stated once:
//   * Fairness. Every call has its own queue. Extraction threads take small slices of the
//     calls' facts in round-robin order; the batcher fills each forward by deficit
//     round-robin over the calls' queues, weighted by subgraph size (nodes + edges), so a
//     call of one fact waits behind at most about one forward of a large ranking, never
//     behind the ranking's whole queue. A caller's calls share one quantum, so a caller
//     with many calls in flight gets about the model time of a caller with one.
//   * Deadlines and cancellation. A call's deadline travels with its work: facts of a call
//     that has expired or been cancelled are dropped before extraction and before the
//     forward, and the batcher wakes for the nearest deadline to finish such calls with
//     DEADLINE_EXCEEDED / CANCELLED at once.
//   * Short forwards. A forward closes at `max_batch_size` subgraphs or when the next
//     subgraph would take it past `max_batch_nodes` / `max_batch_edges` (a larger subgraph
//     runs alone). The budget is what bounds a newcomer's wait behind a large call, so it
//     is small: a few milliseconds of model time.
//   * Bounded memory. A subgraph larger than `max_subgraph_nodes` / `max_subgraph_edges`
//     fails its call with RESOURCE_EXHAUSTED. Extraction runs at most about two forwards
//     ahead of the model (one per call), so extracted subgraphs waiting for the model are
//     bounded whatever the number of calls.
//   * Admission. A call is refused at once with RESOURCE_EXHAUSTED, naming the limit, when
//     the subgraphs admitted and not yet scored would exceed `max_pending_subgraphs` or the
//     memory held by admitted work exceeds `max_queued_bytes` ("busy: retry later"). No
//     caller (CallControl::caller: a token's name, or a connection) holds more than
//     `max_caller_share` of either: over it, its own calls are refused ("retry when your
//     earlier calls have finished") while other callers' are still admitted. A call that
//     alone exceeds a limit or a caller's share could never be admitted: it is refused as
//     such ("narrow the call"), never as "busy".
//   * Memory returns after a burst: once no call is left, at most once a second, freed
//     memory goes back to the kernel (EngineOptions::release_memory).
//   * Batch closing. A forward also closes when its oldest subgraph has waited
//     `max_queue_delay`, or at once when no extraction is under way (waiting longer could
//     only help if another call arrived).
//
// Below, "subgraph" is the engine's word for a WorkItem, whatever the family calls it: its
// limits and metrics count items by their nodes and edges.
//
// Models. Each job names the runner (one per served model) it is scored with
// (ScoringJob::runner), so calls that started before a model reload finish on the old model
// while new calls use the new one; a forward only ever holds items of one runner, and of those
// only items the runner says may share it (BatchRunner::Compatible).
//
// Thread safety: Submit() may be called from any number of threads.
#ifndef GRAIL_SERVER_ENGINE_INFERENCE_ENGINE_H_
#define GRAIL_SERVER_ENGINE_INFERENCE_ENGINE_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace grail {

using EngineClock = std::chrono::steady_clock;

// One caller's share of `limit`: `share` of it rounded up, at least 1; `limit` itself for a
// share of 1 or more (no per-caller limit). The engine's admission and the service's calls in
// flight both count shares so.
int64_t CallerShare(int64_t limit, double share);

struct EngineOptions {
  int max_batch_size = 256;         // subgraphs per forward
  int max_batch_nodes = 4096;       // nodes per forward (a larger subgraph runs alone)
  int max_batch_edges = 8192;       // edges per forward (a larger subgraph runs alone)
  int max_subgraph_nodes = 65536;   // a larger subgraph fails its call
  int max_subgraph_edges = 262144;  // a larger subgraph fails its call
  std::chrono::microseconds max_queue_delay{2000};
  int extraction_threads = 2;
  // Admission: subgraphs admitted and not yet scored, summed over calls.
  int64_t max_pending_subgraphs = 1000000;
  // Admission: bytes held by admitted work (fact lists, per-call search state, extracted
  // subgraphs waiting for the model).
  int64_t max_queued_bytes = int64_t{1} << 30;
  // Admission: the fraction of max_pending_subgraphs and of max_queued_bytes one caller's
  // calls may hold together (1: no per-caller limit).
  double max_caller_share = 0.5;
  // Returns freed memory to the kernel once a burst of work has ended (the server's
  // allocator knows how: model/core/runtime.h, ReleaseFreedMemory). May be empty.
  std::function<void()> release_memory;
};

// Why work was dropped, for metrics.
enum class DropReason { kDeadline, kCancelled };

// Hooks for metrics; every method is called from engine (or handler) threads and must be
// cheap and thread-safe. The default implementation ignores everything.
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  // One subgraph extracted, and how long it took.
  virtual void OnSubgraphExtracted(int nodes, int edges, double seconds) {}
  // One forward: how many subgraphs, their nodes and edges in total, how long they had
  // waited in the queue (the oldest), and the forward's duration.
  virtual void OnBatch(int size, int64_t nodes, int64_t edges, double oldest_wait_seconds,
                       double forward_seconds) {}
  // A call ended by its deadline or its cancellation; `subgraphs` of its facts were never
  // scored (neither extracted nor run through the model, or thrown away after; 0 if it
  // ended before its size was known).
  virtual void OnWorkDropped(DropReason reason, int64_t subgraphs) {}
  // A call refused because of `limit` (a flag's name with underscores, e.g.
  // "max_pending_subgraphs").
  virtual void OnCallRejected(absl::string_view limit) {}
};

// A call's deadline and cancellation, shared by the handler that owns the call and the
// engine that does its work. Thread-safe.
class CallControl {
 public:
  explicit CallControl(EngineClock::time_point deadline = EngineClock::time_point::max())
      : deadline_(deadline) {}
  CallControl(const CallControl&) = delete;
  CallControl& operator=(const CallControl&) = delete;

  EngineClock::time_point deadline() const { return deadline_; }
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // Whose share of the engine's admission limits the call counts in ("" for everyone not
  // named). Set before the call is submitted, never after.
  const std::string& caller() const { return caller_; }
  void set_caller(std::string caller) { caller_ = std::move(caller); }
  // Whether the call should stop: cancelled, or its deadline has passed at `now`.
  bool Stopped(EngineClock::time_point now) const { return cancelled() || now >= deadline_; }
  // The status a stopped call ends with.
  absl::Status StoppedStatus() const;

  // Marks the call cancelled and wakes the engine working on it, which then drops its work
  // and finishes it with CANCELLED. Idempotent.
  void Cancel();

 private:
  friend class InferenceEngine;
  // Called by Cancel(); set by the engine while it holds the call.
  void SetWaker(std::function<void()> waker);

  const EngineClock::time_point deadline_;
  std::string caller_;
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  std::function<void()> waker_ ABSL_GUARDED_BY(mu_);
};

// One extracted unit of a job's work: what the engine queues, bounds and batches. A family's
// item holds what its model's forward reads.
class WorkItem {
 public:
  virtual ~WorkItem() = default;
  // Its size as the engine's limits and its fair share count it: the graph nodes and edges
  // the forward reads for it.
  virtual int64_t nodes() const = 0;
  virtual int64_t edges() const = 0;
  // Heap bytes it holds, for admission.
  virtual int64_t bytes() const = 0;
};

// What a family's work is called in the engine's errors.
struct WorkNames {
  std::string item;    // an item, prefixing its extraction errors: "fact" ("fact 3: ...")
  std::string extent;  // what an item's size measures: "the enclosing subgraph"
  std::string advice;  // what to do about an item over the limits: "raise the limits"
};

// State a family keeps on one engine thread between uses (an extractor, a batch's arrays):
// at most one object of each type, made by the family on first use. Owned by one thread.
class ThreadScratch {
 public:
  // The object of type T this thread keeps, or null.
  template <typename T>
  T* Find() {
    auto it = objects_.find(Key<T>());
    return it == objects_.end() ? nullptr : &static_cast<Holder<T>&>(*it->second).value;
  }
  // Makes this thread's object of type T from `args`, replacing any.
  template <typename T, typename... Args>
  T& Emplace(Args&&... args) {
    auto holder = std::make_unique<Holder<T>>(std::forward<Args>(args)...);
    T& value = holder->value;
    objects_[Key<T>()] = std::move(holder);
    return value;
  }
  // Drops every object (their memory goes back).
  void Clear() { objects_.clear(); }

 private:
  struct Base {
    virtual ~Base() = default;
  };
  template <typename T>
  struct Holder final : Base {
    template <typename... Args>
    explicit Holder(Args&&... args) : value(std::forward<Args>(args)...) {}
    T value;
  };
  template <typename T>
  static const void* Key() {
    static const char key = 0;
    return &key;
  }
  absl::flat_hash_map<const void*, std::unique_ptr<Base>> objects_;
};

class ScoringJob;

// One item of a batch: the job that extracted it, its index there, and the item.
struct BatchEntry {
  ScoringJob* job = nullptr;
  size_t index = 0;
  const WorkItem* item = nullptr;
};

// What a forward ran, for metrics, and whether it failed (then every call in it fails).
struct BatchOutcome {
  absl::Status status;
  int64_t nodes = 0;  // what the forward ran (items that share a pass count once)
  int64_t edges = 0;
  double forward_seconds = 0;
  bool ran = true;  // false: every item was answered without a forward (nothing to report)
};

// A model's batch runner: one forward over items of its jobs. Every item it is handed was
// extracted by a job whose runner() is this one, so it may cast both to its family's types.
class BatchRunner {
 public:
  virtual ~BatchRunner() = default;
  virtual const WorkNames& names() const = 0;
  // Whether `next` may share a forward with `first` (a batch's first item). By default any.
  virtual bool Compatible(const WorkItem& first, const WorkItem& next) const { return true; }
  // Runs `batch` (never empty) as one forward and hands each job its item's result. From the
  // batcher thread only; `scratch` is that thread's.
  virtual BatchOutcome Run(absl::Span<const BatchEntry> batch, ThreadScratch& scratch) const = 0;
};

// One call's work as the engine sees it. The engine calls, in this order:
//   Prepare() once, on an extraction thread (set-up that may be expensive, such as
//     neighbourhood searches; an error fails the call);
//   Extract(i, ...) for every i in [0, size()), on extraction threads, several at once;
//   the runner's Run() with each item extracted (not those Extract answered itself), from
//     the batcher thread only;
//   Finish(status) exactly once, with OK after every item was run, or with an error instead
//     of the items still missing; from the batcher thread, or from Submit() or Shutdown().
// The engine holds the job until Finish() returns.
class ScoringJob {
 public:
  virtual ~ScoringJob() = default;

  virtual absl::Status Prepare() { return absl::OkStatus(); }
  // The number of items; read after Prepare().
  virtual size_t size() const = 0;
  // Extracts item i with `scratch` (the calling thread's own). A search that would hold more
  // than `max_nodes` nodes may stop there and return RESOURCE_EXHAUSTED, which the engine
  // reports as the item being over its limits; any other error fails the call as it is.
  // A null item says the job answered item i itself (from a cache): nothing is run for it.
  // Thread-safe for distinct i.
  virtual absl::StatusOr<std::unique_ptr<WorkItem>> Extract(size_t i, ThreadScratch& scratch,
                                                            int64_t max_nodes) = 0;
  // The runner of the job's model, which must stay alive until Finish() returns. Items of
  // jobs with different runners never share a forward.
  virtual const BatchRunner& runner() const = 0;
  virtual void Finish(absl::Status status) = 0;
  // Heap bytes the job holds, for admission (read after Submit and after Prepare).
  virtual size_t MemoryBytes() const = 0;
  // Item i as a user would recognise it, for error messages.
  virtual std::string Describe(size_t i) const = 0;
};

// What the engine holds now, for metrics.
struct EngineLoad {
  int64_t calls = 0;              // calls admitted and not finished
  int64_t pending_subgraphs = 0;  // facts admitted and not yet scored
  int64_t queued_subgraphs = 0;   // extracted, waiting for the model
  int64_t held_bytes = 0;         // what admission compares with max_queued_bytes
};

class InferenceEngine {
 public:
  // Starts the extraction threads and the batcher. `observer` may be null.
  explicit InferenceEngine(const EngineOptions& options, EngineObserver* observer = nullptr);
  // Shuts down (see Shutdown()).
  ~InferenceEngine();
  InferenceEngine(const InferenceEngine&) = delete;
  InferenceEngine& operator=(const InferenceEngine&) = delete;

  // Admits `job` or refuses it. `known_size` is the job's size if the caller knows it
  // before Prepare() (0 otherwise); admission counts it at once. Refusals, and UNAVAILABLE
  // after Shutdown(), call job->Finish() before Submit returns.
  void Submit(std::shared_ptr<ScoringJob> job, std::shared_ptr<CallControl> control,
              size_t known_size);

  // Refuses new work, finishes every job still held with UNAVAILABLE and joins the
  // threads. Idempotent.
  void Shutdown();

  EngineLoad Load() const;
  const EngineOptions& options() const { return options_; }
  EngineObserver& observer() const { return *observer_; }

 private:
  struct Call;
  struct QueuedSubgraph;

  void ExtractionLoop();
  void BatcherLoop();
  // The next call an extraction thread should work on, in round-robin order, or null.
  std::shared_ptr<Call> NextExtractionWork() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes calls that are complete, failed, expired or cancelled from the schedule and
  // moves them to `*finished`; returns the nearest deadline among the calls left.
  EngineClock::time_point CollectFinished(EngineClock::time_point now,
                                          std::vector<std::shared_ptr<Call>>* finished)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Fills `*batch` from the calls' queues by deficit round-robin.
  void FormBatch(std::vector<QueuedSubgraph>* batch) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs one forward and hands the results to their calls.
  void RunBatch(std::vector<QueuedSubgraph>& batch, ThreadScratch& scratch);
  // Calls Finish() on each call with its outcome and reports dropped work.
  void FinishCalls(std::vector<std::shared_ptr<Call>>& calls);
  // Fails `call` with `status` unless it already has an outcome; the batcher finishes it.
  void Fail(Call& call, absl::Status status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasQueueRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Admission (see the policies above) of `call` holding `pending` subgraphs and `bytes`
  // from now on, instead of what it was admitted with before (nothing, at Submit). On OK
  // the totals and the caller's usage count the new amounts; otherwise RESOURCE_EXHAUSTED
  // and `*limit` names the flag.
  absl::Status Admit(Call& call, int64_t pending, int64_t bytes, absl::string_view* limit)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes a finished call's amounts off its caller's usage.
  void Release(Call& call) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Wake();

  const EngineOptions options_;
  EngineObserver default_observer_;
  EngineObserver* const observer_;
  // Deficit round-robin quantum, in subgraph cost units (nodes + edges).
  const int64_t quantum_;

  mutable absl::Mutex mu_;
  absl::CondVar extraction_ready_;  // work to extract may have appeared, or stopping_
  absl::CondVar batcher_ready_;     // subgraphs queued, a call to finish, or stopping_
  // Calls admitted and not finished, in round-robin order.
  std::vector<std::shared_ptr<Call>> calls_ ABSL_GUARDED_BY(mu_);
  size_t extraction_cursor_ ABSL_GUARDED_BY(mu_) = 0;  // next call extraction looks at
  size_t batch_cursor_ ABSL_GUARDED_BY(mu_) = 0;       // next call the batcher serves
  int64_t pending_subgraphs_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t queued_subgraphs_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t queued_cost_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t held_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // What each caller's admitted calls hold, for max_caller_share; callers with no call left
  // are removed.
  struct CallerUsage {
    int64_t calls = 0;
    int64_t pending = 0;
    int64_t bytes = 0;
  };
  absl::flat_hash_map<std::string, CallerUsage> callers_ ABSL_GUARDED_BY(mu_);
  int extracting_ ABSL_GUARDED_BY(mu_) = 0;  // slices taken by extraction threads
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Forwards since freed memory was last returned to the kernel, and when that was.
  int64_t forwards_since_release_ ABSL_GUARDED_BY(mu_) = 0;
  EngineClock::time_point last_release_ ABSL_GUARDED_BY(mu_);

  std::vector<std::thread> extraction_threads_;
  std::thread batcher_;
};

}  // namespace grail

#endif  // GRAIL_SERVER_ENGINE_INFERENCE_ENGINE_H_
