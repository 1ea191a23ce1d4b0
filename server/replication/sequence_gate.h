// Read-your-writes across replicas: a request may name the graph version it must see
// (min_graph_sequence, typically the sequence of an AddTriples ack it got from any replica);
// a replica that has not applied that far yet holds the request until it has, or until its
// deadline, and then answers UNAVAILABLE saying how far behind it is.
//
// The gate holds no thread per waiting call: Advance() (called by the store after each
// commit) wakes the gate's one thread, which runs the calls it satisfies and fails those
// whose deadline passes first. A call already satisfied runs at once, on the caller's
// thread.
//
// Thread safety: every method may be called from any thread.
#ifndef GRAIL_SERVER_REPLICATION_SEQUENCE_GATE_H_
#define GRAIL_SERVER_REPLICATION_SEQUENCE_GATE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace grail {

class SequenceGate {
 public:
  using Clock = std::chrono::steady_clock;
  using Callback = std::function<void(absl::Status)>;

  // `applied`: the sequence the graph is at now.
  explicit SequenceGate(uint64_t applied);
  // Fails every call still waiting with UNAVAILABLE (the server is shutting down).
  ~SequenceGate();
  SequenceGate(const SequenceGate&) = delete;
  SequenceGate& operator=(const SequenceGate&) = delete;

  // The graph is at `sequence` now (never moves back: a lower value is ignored). The calls it
  // satisfies run on the gate's thread (never on the caller's, which may hold a lock).
  void Advance(uint64_t sequence);
  uint64_t applied() const;

  // Runs `done(OK)` once the graph is at `sequence` or later (at once, on this thread, if it
  // is already), or `done(UNAVAILABLE)` at `deadline` if it is not by then; exactly once.
  void WhenReached(uint64_t sequence, Clock::time_point deadline, Callback done);

 private:
  struct Waiter {
    uint64_t sequence;
    Callback done;
  };
  // The gate's thread: runs reached calls and fails expired ones.
  void ExpireLoop();
  static absl::Status Behind(uint64_t applied, uint64_t wanted);

  mutable absl::Mutex mu_;
  uint64_t applied_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Counts insertions and advances past waiting calls: the gate's thread wakes on a change.
  uint64_t changes_ ABSL_GUARDED_BY(mu_) = 0;
  // Waiting calls by deadline (ties in arrival order).
  std::multimap<Clock::time_point, Waiter> waiting_ ABSL_GUARDED_BY(mu_);
  std::thread expirer_;
};

}  // namespace grail

#endif  // GRAIL_SERVER_REPLICATION_SEQUENCE_GATE_H_
