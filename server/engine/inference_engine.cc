#include "server/engine/inference_engine.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace grail {
namespace {

using Clock = EngineClock;

double SecondsBetween(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// Facts an extraction thread takes from one call before the next call's turn. Small, so
// that a call arriving behind a large one gets an extraction thread soon; large enough
// that taking a slice (one lock) costs little next to extracting it.
constexpr size_t kExtractionSlice = 8;
// A slice of large subgraphs is cut short after this long.
constexpr std::chrono::microseconds kExtractionSliceTime{1000};

constexpr int64_t kMiB = int64_t{1} << 20;

// Shortest time between two returns of freed memory to the kernel.
constexpr std::chrono::seconds kReleaseInterval{1};

}  // namespace

absl::Status CallControl::StoppedStatus() const {
  // gRPC cancels a call whose deadline passed, too: the deadline is the reason then. gRPC's
  // timer and this converted copy of the deadline can disagree by a moment, so a cancellation
  // this close to the deadline is the deadline's (as graph_service.cc counts it too).
  if (deadline_ != Clock::time_point::max() &&
      Clock::now() + std::chrono::milliseconds(20) >= deadline_) {
    return absl::DeadlineExceededError("the call's deadline passed before scoring finished");
  }
  return absl::CancelledError("the client cancelled the call");
}

void CallControl::Cancel() {
  cancelled_.store(true, std::memory_order_release);
  absl::MutexLock lock(&mu_);
  if (waker_) waker_();
}

void CallControl::SetWaker(std::function<void()> waker) {
  absl::MutexLock lock(&mu_);
  waker_ = std::move(waker);
}

struct InferenceEngine::QueuedSubgraph {
  std::shared_ptr<Call> call;
  size_t index = 0;
  std::unique_ptr<WorkItem> item;
  int64_t nodes = 0, edges = 0;  // the item's, read once
  Clock::time_point queued_at;
  int64_t bytes = 0;
  int64_t num_nodes() const { return nodes; }
  int64_t num_edges() const { return edges; }
  int64_t cost() const { return nodes + edges; }
};

// One admitted call. Everything but the constant members is guarded by the engine's mu_.
struct InferenceEngine::Call {
  enum class Stage { kNew, kPreparing, kRunning };

  std::shared_ptr<ScoringJob> job;
  std::shared_ptr<CallControl> control;
  // Set once the call has an outcome other than success; extraction threads read it
  // without the lock to stop early.
  std::atomic<bool> failed{false};

  Stage stage = Stage::kNew;
  size_t size = 0;              // facts (known after Prepare)
  size_t next = 0;              // first fact not yet handed to an extraction thread
  size_t extracting = 0;        // facts handed out and not yet back
  size_t scored = 0;            // facts accepted
  int64_t counted_pending = 0;  // this call's share of pending_subgraphs_
  int64_t job_bytes = 0;        // this call's share of held_bytes_ (besides its queue)
  std::string caller;           // whose share it counts in (CallControl::caller)
  bool admitted = false;        // counted in callers_
  std::deque<QueuedSubgraph> queue;
  int64_t queued_nodes = 0, queued_edges = 0, queued_bytes = 0;
  int64_t deficit = 0;
  absl::Status error;  // the first failure
  bool removed = false;
  // Set when the call is taken off the schedule.
  absl::Status outcome;
  int64_t dropped = 0;
};

InferenceEngine::InferenceEngine(const EngineOptions& options, EngineObserver* observer)
    : options_(options),
      observer_(observer != nullptr ? observer : &default_observer_),
      quantum_(std::max<int64_t>(1, (int64_t{std::max(1, options.max_batch_nodes)} +
                                     std::max(1, options.max_batch_edges)) /
                                        32)) {
  const int extraction_threads = std::max(1, options_.extraction_threads);
  for (int i = 0; i < extraction_threads; ++i) {
    extraction_threads_.emplace_back([this] { ExtractionLoop(); });
  }
  batcher_ = std::thread([this] { BatcherLoop(); });
}

InferenceEngine::~InferenceEngine() { Shutdown(); }

void InferenceEngine::Wake() {
  absl::MutexLock lock(&mu_);
  batcher_ready_.Signal();
}

void InferenceEngine::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    extraction_ready_.SignalAll();
    batcher_ready_.SignalAll();
  }
  for (std::thread& t : extraction_threads_) {
    if (t.joinable()) t.join();
  }
  if (batcher_.joinable()) batcher_.join();
  // Whatever is left belongs to calls still waiting: release them.
  std::vector<std::shared_ptr<Call>> left;
  {
    absl::MutexLock lock(&mu_);
    for (std::shared_ptr<Call>& call : calls_) {
      call->removed = true;
      call->outcome = absl::UnavailableError("the server is shutting down");
      left.push_back(std::move(call));
    }
    calls_.clear();
    callers_.clear();
    pending_subgraphs_ = queued_subgraphs_ = queued_cost_ = held_bytes_ = 0;
  }
  FinishCalls(left);
}

EngineLoad InferenceEngine::Load() const {
  absl::MutexLock lock(&mu_);
  return EngineLoad{static_cast<int64_t>(calls_.size()), pending_subgraphs_, queued_subgraphs_,
                    held_bytes_};
}

int64_t CallerShare(int64_t limit, double share) {
  if (share >= 1) return limit;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(limit * share)));
}

absl::Status InferenceEngine::Admit(Call& call, int64_t pending, int64_t bytes,
                                    absl::string_view* limit) {
  const bool shared = options_.max_caller_share < 1;
  const int64_t share_pending =
      CallerShare(options_.max_pending_subgraphs, options_.max_caller_share);
  const int64_t share_bytes = CallerShare(options_.max_queued_bytes, options_.max_caller_share);
  const std::string share_of = absl::StrCat("one caller may hold ", options_.max_caller_share,
                                            " of it (--max-caller-share)");
  // A call that could never be admitted, however idle the server: the caller must narrow
  // it, retrying cannot help.
  if (pending > share_pending) {
    *limit = shared ? "max_caller_share" : "max_pending_subgraphs";
    return absl::ResourceExhaustedError(
        absl::StrCat("this call alone adds ", pending, " subgraphs to score; the limit is ",
                     options_.max_pending_subgraphs, " (--max-pending-subgraphs)",
                     shared ? absl::StrCat(" and ", share_of, ": ", share_pending) : "",
                     "; it can never be admitted: narrow the call (fewer facts or candidates)"));
  }
  if (bytes > share_bytes) {
    *limit = shared ? "max_caller_share" : "max_queued_bytes";
    return absl::ResourceExhaustedError(absl::StrCat(
        "this call alone needs ", (bytes + kMiB - 1) / kMiB, " MiB; the limit is ",
        options_.max_queued_bytes / kMiB, " MiB (--max-queued-bytes)",
        shared ? absl::StrCat(" and ", share_of, ": ", share_bytes / kMiB, " MiB") : "",
        "; it can never be admitted: narrow the call (a smaller top_k, fewer candidates or "
        "facts)"));
  }
  // What the caller's other calls hold: over its share, it waits for them, not the others.
  CallerUsage& mine = callers_[call.caller];
  const int64_t my_pending = mine.pending - call.counted_pending;
  const int64_t my_bytes = mine.bytes - call.job_bytes;
  if (shared && (my_pending + pending > share_pending || my_bytes + bytes > share_bytes)) {
    *limit = "max_caller_share";
    if (mine.calls == 0) callers_.erase(call.caller);
    return absl::ResourceExhaustedError(
        absl::StrCat("this caller's calls in progress hold ", my_pending, " subgraphs and ",
                     (my_bytes + kMiB - 1) / kMiB, " MiB, and this call adds ", pending, " and ",
                     (bytes + kMiB - 1) / kMiB, " MiB; one caller may hold ", share_pending,
                     " and ", share_bytes / kMiB,
                     " MiB (--max-caller-share of --max-pending-subgraphs and "
                     "--max-queued-bytes); retry when its earlier calls have finished"));
  }
  const int64_t others_pending = pending_subgraphs_ - call.counted_pending;
  const int64_t others_bytes = held_bytes_ - call.job_bytes;
  if (others_pending + pending > options_.max_pending_subgraphs) {
    *limit = "max_pending_subgraphs";
    if (mine.calls == 0) callers_.erase(call.caller);
    return absl::ResourceExhaustedError(
        absl::StrCat("the server is busy: ", others_pending,
                     " subgraphs are waiting to be scored and this "
                     "call adds ",
                     pending, "; the limit is ", options_.max_pending_subgraphs,
                     " (--max-pending-subgraphs); retry later, with backoff"));
  }
  if (others_bytes + bytes > options_.max_queued_bytes) {
    *limit = "max_queued_bytes";
    if (mine.calls == 0) callers_.erase(call.caller);
    return absl::ResourceExhaustedError(absl::StrCat(
        "the server is busy: admitted work holds ", (others_bytes + kMiB - 1) / kMiB,
        " MiB and this call ", (bytes + kMiB - 1) / kMiB, " MiB; the limit is ",
        options_.max_queued_bytes / kMiB, " MiB (--max-queued-bytes); retry later, with backoff"));
  }
  if (!call.admitted) {
    call.admitted = true;
    ++mine.calls;
  }
  mine.pending += pending - call.counted_pending;
  mine.bytes += bytes - call.job_bytes;
  pending_subgraphs_ += pending - call.counted_pending;
  held_bytes_ += bytes - call.job_bytes;
  call.counted_pending = pending;
  call.job_bytes = bytes;
  return absl::OkStatus();
}

void InferenceEngine::Release(Call& call) {
  if (!call.admitted) return;
  call.admitted = false;
  const auto it = callers_.find(call.caller);
  if (it == callers_.end()) return;
  it->second.pending -= call.counted_pending;
  it->second.bytes -= call.job_bytes;
  if (--it->second.calls == 0) callers_.erase(it);
}

void InferenceEngine::Submit(std::shared_ptr<ScoringJob> job, std::shared_ptr<CallControl> control,
                             size_t known_size) {
  auto call = std::make_shared<Call>();
  call->job = job;
  call->control = control;
  const int64_t bytes = static_cast<int64_t>(job->MemoryBytes());
  // Before taking mu_: Cancel() holds the control's lock while it wakes the engine.
  control->SetWaker([this] { Wake(); });
  absl::Status refused;
  absl::string_view limit;
  {
    absl::MutexLock lock(&mu_);
    call->caller = control->caller();
    if (stopping_) {
      refused = absl::UnavailableError("the server is shutting down");
    } else {
      refused = Admit(*call, static_cast<int64_t>(known_size), bytes, &limit);
    }
    if (refused.ok()) {
      calls_.push_back(call);
      extraction_ready_.Signal();
      // The call may be stopped already (deadline passed, cancelled before the waker was
      // set): the batcher finishes such calls.
      batcher_ready_.Signal();
    }
  }
  if (!refused.ok()) {
    control->SetWaker(nullptr);
    if (!limit.empty()) observer_->OnCallRejected(limit);
    job->Finish(std::move(refused));
  }
}

void InferenceEngine::Fail(Call& call, absl::Status status) {
  if (!call.error.ok() || call.removed) return;
  call.error = std::move(status);
  call.failed.store(true, std::memory_order_release);
  batcher_ready_.Signal();
}

bool InferenceEngine::HasQueueRoom() const {
  // Extraction runs about two forwards ahead of the model, no more, whatever the number
  // of calls: enough to keep the model busy while the next batch is extracted.
  return queued_subgraphs_ + extracting_ < 2 * int64_t{std::max(1, options_.max_batch_size)} &&
         queued_cost_ < 2 * (int64_t{options_.max_batch_nodes} + options_.max_batch_edges);
}

std::shared_ptr<InferenceEngine::Call> InferenceEngine::NextExtractionWork() {
  if (calls_.empty() || !HasQueueRoom()) return nullptr;
  const size_t max_batch = static_cast<size_t>(std::max(1, options_.max_batch_size));
  const int64_t batch_cost = int64_t{options_.max_batch_nodes} + options_.max_batch_edges;
  const Clock::time_point now = Clock::now();
  for (size_t step = 0; step < calls_.size(); ++step) {
    const size_t at = (extraction_cursor_ + step) % calls_.size();
    Call& call = *calls_[at];
    if (!call.error.ok() || call.control->Stopped(now)) continue;
    bool eligible = false;
    if (call.stage == Call::Stage::kNew) {
      eligible = true;
    } else if (call.stage == Call::Stage::kRunning && call.next < call.size) {
      // A call keeps at most about one forward's worth extracted ahead of the model.
      eligible = call.queue.size() + call.extracting < max_batch &&
                 call.queued_nodes + call.queued_edges < batch_cost;
    }
    if (eligible) {
      extraction_cursor_ = at + 1;
      return calls_[at];
    }
  }
  return nullptr;
}

void InferenceEngine::ExtractionLoop() {
  ThreadScratch scratch;  // the families' extractors, this thread's own
  std::vector<QueuedSubgraph> extracted;
  const size_t max_batch = static_cast<size_t>(std::max(1, options_.max_batch_size));
  for (;;) {
    std::shared_ptr<Call> call;
    bool prepare = false;
    size_t begin = 0, end = 0;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && (call = NextExtractionWork()) == nullptr) extraction_ready_.Wait(&mu_);
      if (stopping_) return;
      if (call->stage == Call::Stage::kNew) {
        call->stage = Call::Stage::kPreparing;
        prepare = true;
      } else {
        begin = call->next;
        const size_t room = max_batch - std::min(max_batch, call->queue.size() + call->extracting);
        end = std::min({call->size, begin + kExtractionSlice, begin + std::max<size_t>(room, 1)});
        call->next = end;
        call->extracting += end - begin;
      }
      ++extracting_;
    }

    if (prepare) {
      const absl::Status status = call->job->Prepare();
      const size_t size = status.ok() ? call->job->size() : 0;
      const int64_t bytes = static_cast<int64_t>(call->job->MemoryBytes());
      absl::MutexLock lock(&mu_);
      --extracting_;
      if (call->removed) continue;
      if (!status.ok()) {
        Fail(*call, status);
        continue;
      }
      absl::string_view limit;
      if (absl::Status refused = Admit(*call, static_cast<int64_t>(size), bytes, &limit);
          !refused.ok()) {
        observer_->OnCallRejected(limit);
        Fail(*call, std::move(refused));
        continue;
      }
      call->size = size;
      call->stage = Call::Stage::kRunning;
      extraction_ready_.SignalAll();
      if (size == 0) batcher_ready_.Signal();  // nothing to score: finish it
      continue;
    }

    const WorkNames& names = call->job->runner().names();
    extracted.clear();
    absl::Status error;
    const Clock::time_point slice_start = Clock::now();
    bool may_yield = true;
    size_t answered = 0;  // items the job answered without a forward
    for (size_t i = begin; i < end; ++i) {
      if (call->failed.load(std::memory_order_acquire) || call->control->Stopped(Clock::now())) {
        break;  // dropped before extraction; the batcher finishes the call
      }
      const Clock::time_point start = Clock::now();
      if (may_yield && i > begin && start - slice_start > kExtractionSliceTime) {
        // Large subgraphs: hand the rest of the slice back so that other calls get their
        // turn, unless a later slice of this call was taken meanwhile (facts are handed out
        // in order, so then this thread finishes its slice).
        absl::MutexLock lock(&mu_);
        may_yield = false;
        if (call->next == end) {
          call->next = i;
          call->extracting -= end - i;
          end = i;
          extraction_ready_.Signal();
          break;
        }
      }
      QueuedSubgraph item;
      // A search may stop one node past the limit: a hub's whole neighbourhood is never
      // searched only to be refused.
      absl::StatusOr<std::unique_ptr<WorkItem>> work =
          call->job->Extract(i, scratch, int64_t{options_.max_subgraph_nodes} + 1);
      const bool cut = absl::IsResourceExhausted(work.status());  // stopped at the limit
      if (!work.ok() && !cut) {
        error = absl::Status(work.status().code(),
                             absl::StrCat(names.item, " ", i, ": ", work.status().message()));
        break;
      }
      if (work.ok() && *work == nullptr) {  // the job answered it itself
        ++answered;
        continue;
      }
      if (work.ok()) {
        item.item = *std::move(work);
        item.nodes = item.item->nodes();
        item.edges = item.item->edges();
      }
      const int64_t nodes = item.num_nodes(), edges = item.num_edges();
      if (cut || nodes > options_.max_subgraph_nodes || edges > options_.max_subgraph_edges) {
        const bool too_many_nodes = cut || nodes > options_.max_subgraph_nodes;
        observer_->OnCallRejected(too_many_nodes ? "max_subgraph_nodes" : "max_subgraph_edges");
        const std::string size =
            cut ? absl::StrCat("more than ", options_.max_subgraph_nodes, " nodes")
                : absl::StrCat(nodes, " nodes and ", edges, " edges");
        error = absl::ResourceExhaustedError(absl::StrCat(
            call->job->Describe(i), ": ", names.extent, " has ", size,
            ", more than the server scores (--max-subgraph-nodes=", options_.max_subgraph_nodes,
            ", --max-subgraph-edges=", options_.max_subgraph_edges, "); ", names.advice));
        break;
      }
      item.queued_at = Clock::now();
      observer_->OnSubgraphExtracted(static_cast<int>(nodes), static_cast<int>(edges),
                                     SecondsBetween(start, item.queued_at));
      item.call = call;
      item.index = i;
      item.bytes = item.item->bytes() + static_cast<int64_t>(sizeof(QueuedSubgraph));
      extracted.push_back(std::move(item));
    }

    absl::MutexLock lock(&mu_);
    --extracting_;
    call->extracting -= end - begin;
    if (!error.ok()) Fail(*call, std::move(error));
    if (answered > 0 && !call->removed) {
      call->scored += answered;
      pending_subgraphs_ -= static_cast<int64_t>(answered);
      batcher_ready_.Signal();  // the call may be complete now
    }
    if (!call->removed && call->error.ok()) {
      for (QueuedSubgraph& item : extracted) {
        call->queued_nodes += item.num_nodes();
        call->queued_edges += item.num_edges();
        call->queued_bytes += item.bytes;
        queued_subgraphs_ += 1;
        queued_cost_ += item.cost();
        held_bytes_ += item.bytes;
        call->queue.push_back(std::move(item));
      }
      if (!extracted.empty()) batcher_ready_.Signal();
    }
    extracted.clear();  // what a failed or removed call had extracted is dropped here
    extraction_ready_.SignalAll();
  }
}

Clock::time_point InferenceEngine::CollectFinished(Clock::time_point now,
                                                   std::vector<std::shared_ptr<Call>>* finished) {
  Clock::time_point nearest = Clock::time_point::max();
  size_t write = 0;
  for (size_t read = 0; read < calls_.size(); ++read) {
    std::shared_ptr<Call>& call = calls_[read];
    const bool complete =
        call->stage == Call::Stage::kRunning && call->error.ok() && call->scored == call->size;
    if (!complete && call->error.ok() && call->control->Stopped(now)) {
      call->error = call->control->StoppedStatus();
      call->failed.store(true, std::memory_order_release);
    }
    if (!complete && call->error.ok()) {
      nearest = std::min(nearest, call->control->deadline());
      calls_[write++] = std::move(call);
      continue;
    }
    // Off the schedule: give back what it held.
    call->removed = true;
    call->outcome = complete ? absl::OkStatus() : call->error;
    call->dropped =
        std::max<int64_t>(0, std::max(call->counted_pending, static_cast<int64_t>(call->size)) -
                                 static_cast<int64_t>(call->scored));
    pending_subgraphs_ -= call->counted_pending - static_cast<int64_t>(call->scored);
    held_bytes_ -= call->job_bytes + call->queued_bytes;
    Release(*call);
    queued_subgraphs_ -= static_cast<int64_t>(call->queue.size());
    queued_cost_ -= call->queued_nodes + call->queued_edges;
    call->queue.clear();
    finished->push_back(std::move(call));
  }
  calls_.resize(write);
  return nearest;
}

void InferenceEngine::FinishCalls(std::vector<std::shared_ptr<Call>>& calls) {
  for (std::shared_ptr<Call>& call : calls) {
    call->control->SetWaker(nullptr);
    if (!call->outcome.ok()) {
      if (absl::IsDeadlineExceeded(call->outcome)) {
        observer_->OnWorkDropped(DropReason::kDeadline, call->dropped);
      } else if (absl::IsCancelled(call->outcome)) {
        observer_->OnWorkDropped(DropReason::kCancelled, call->dropped);
      }
    }
    call->job->Finish(call->outcome);
  }
  calls.clear();
}

void InferenceEngine::FormBatch(std::vector<QueuedSubgraph>* batch) {
  batch->clear();
  if (calls_.empty()) return;
  const size_t max_batch = static_cast<size_t>(std::max(1, options_.max_batch_size));
  int64_t nodes = 0, edges = 0;
  bool full = false;
  const size_t n = calls_.size();
  // One forward runs one model: the first call served picks it, calls of another model (a
  // reload in progress) wait for a later forward.
  const BatchRunner* runner = nullptr;
  // Deficit round-robin: every pass gives each call with queued subgraphs a quantum of
  // cost (divided among its caller's calls); a call takes subgraphs while its deficit
  // covers them. Passes repeat until the
  // batch is full or every queue is empty, so a large subgraph waits a few passes for its
  // deficit, not for another batch.
  for (bool any_queued = true; any_queued && !full && batch->size() < max_batch;) {
    any_queued = false;
    for (size_t step = 0; step < n && !full && batch->size() < max_batch; ++step) {
      Call& call = *calls_[(batch_cursor_ + step) % n];
      if (call.queue.empty() || !call.error.ok()) {
        call.deficit = 0;
        continue;
      }
      if (runner != nullptr && &call.job->runner() != runner) continue;
      // Items the runner cannot run with the batch's first (items of another graph version,
      // when its forward runs one graph, say) wait for a later forward.
      if (!batch->empty() && !runner->Compatible(*batch->front().item, *call.queue.front().item)) {
        continue;
      }
      runner = &call.job->runner();
      // A caller's calls share one quantum: a caller with eight calls in flight gets the
      // turn of a caller with one, not eight of them.
      const auto caller = callers_.find(call.caller);
      const int64_t calls =
          caller == callers_.end() ? 1 : std::max<int64_t>(1, caller->second.calls);
      call.deficit += std::max<int64_t>(1, quantum_ / calls);
      while (!call.queue.empty() && batch->size() < max_batch) {
        QueuedSubgraph& next = call.queue.front();
        if (next.cost() > call.deficit) break;
        const int64_t sn = next.num_nodes(), se = next.num_edges();
        if (!batch->empty() &&
            (nodes + sn > options_.max_batch_nodes || edges + se > options_.max_batch_edges)) {
          full = true;
          break;
        }
        nodes += sn;
        edges += se;
        call.deficit -= next.cost();
        call.queued_nodes -= sn;
        call.queued_edges -= se;
        call.queued_bytes -= next.bytes;
        queued_subgraphs_ -= 1;
        queued_cost_ -= next.cost();
        held_bytes_ -= next.bytes;
        batch->push_back(std::move(next));
        call.queue.pop_front();
      }
      if (call.queue.empty()) {
        call.deficit = 0;
      } else {
        any_queued = true;
      }
    }
  }
  batch_cursor_ = (batch_cursor_ + 1) % n;
}

void InferenceEngine::BatcherLoop() {
  const int64_t max_batch = std::max(1, options_.max_batch_size);
  std::vector<QueuedSubgraph> batch;
  std::vector<std::shared_ptr<Call>> finished;
  ThreadScratch scratch;  // the runners' batch arrays, this thread's own
  for (;;) {
    bool release = false;
    {
      absl::MutexLock lock(&mu_);
      for (;;) {
        if (stopping_) return;
        const Clock::time_point now = Clock::now();
        const Clock::time_point nearest_deadline = CollectFinished(now, &finished);
        if (!finished.empty()) break;
        Clock::time_point wake_at = nearest_deadline;
        if (calls_.empty() && forwards_since_release_ > 0) {
          // A burst ended: give its memory back, at most once a second.
          if (now - last_release_ >= kReleaseInterval) {
            forwards_since_release_ = 0;
            last_release_ = now;
            release = true;
            break;
          }
          wake_at = std::min(wake_at, last_release_ + kReleaseInterval);
        }
        if (queued_subgraphs_ > 0) {
          Clock::time_point oldest = Clock::time_point::max();
          bool more_coming = extracting_ > 0;
          int64_t queued_nodes = 0, queued_edges = 0;
          for (const std::shared_ptr<Call>& call : calls_) {
            if (!call->queue.empty()) oldest = std::min(oldest, call->queue.front().queued_at);
            more_coming |= call->stage != Call::Stage::kRunning || call->next < call->size;
            queued_nodes += call->queued_nodes;
            queued_edges += call->queued_edges;
          }
          const bool full = queued_subgraphs_ >= max_batch ||
                            queued_nodes >= options_.max_batch_nodes ||
                            queued_edges >= options_.max_batch_edges;
          const Clock::time_point close_at = oldest + options_.max_queue_delay;
          if (full || !more_coming || now >= close_at) {
            FormBatch(&batch);
            if (!batch.empty()) break;
          }
          wake_at = std::min(wake_at, close_at);
        }
        if (wake_at == Clock::time_point::max()) {
          batcher_ready_.Wait(&mu_);
        } else if (wake_at > now) {
          batcher_ready_.WaitWithTimeout(&mu_, absl::FromChrono(wake_at - now));
        }
      }
    }
    extraction_ready_.SignalAll();  // the queues shrank
    FinishCalls(finished);
    if (!batch.empty()) RunBatch(batch, scratch);
    if (release) {
      scratch.Clear();  // the last batch's arrays too
      if (options_.release_memory) options_.release_memory();
    }
  }
}

void InferenceEngine::RunBatch(std::vector<QueuedSubgraph>& batch, ThreadScratch& scratch) {
  const Clock::time_point now = Clock::now();
  Clock::time_point oldest = now;
  std::vector<BatchEntry> entries;
  entries.reserve(batch.size());
  for (const QueuedSubgraph& item : batch) {
    entries.push_back({item.call->job.get(), item.index, item.item.get()});
    oldest = std::min(oldest, item.queued_at);
  }
  const BatchOutcome outcome = batch.front().call->job->runner().Run(entries, scratch);
  const absl::Status& status = outcome.status;
  if (outcome.ran) {
    observer_->OnBatch(static_cast<int>(batch.size()), outcome.nodes, outcome.edges,
                       SecondsBetween(oldest, now), outcome.forward_seconds);
  }
  {
    absl::MutexLock lock(&mu_);
    for (QueuedSubgraph& item : batch) {
      Call& call = *item.call;
      if (!status.ok()) {
        Fail(call, status);
        continue;
      }
      ++call.scored;
    }
    // Scored facts are no longer pending.
    if (status.ok()) pending_subgraphs_ -= static_cast<int64_t>(batch.size());
    ++forwards_since_release_;
  }
  batch.clear();  // drops the batch's references to calls and graphs now
}

}  // namespace grail
