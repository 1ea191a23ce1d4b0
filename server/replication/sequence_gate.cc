#include "server/replication/sequence_gate.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace grail {

SequenceGate::SequenceGate(uint64_t applied) : applied_(applied) {
  expirer_ = std::thread([this] { ExpireLoop(); });
}

SequenceGate::~SequenceGate() {
  std::multimap<Clock::time_point, Waiter> left;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    left.swap(waiting_);
  }
  expirer_.join();
  for (auto& [deadline, waiter] : left) {
    waiter.done(absl::UnavailableError("the server is shutting down"));
  }
}

uint64_t SequenceGate::applied() const {
  absl::MutexLock lock(&mu_);
  return applied_;
}

absl::Status SequenceGate::Behind(uint64_t applied, uint64_t wanted) {
  return absl::UnavailableError(
      absl::StrCat("this replica has applied the graph up to sequence ", applied, ", ",
                   wanted - applied, " behind the requested min_graph_sequence ", wanted,
                   "; retry (on this or another replica) or send a longer deadline"));
}

void SequenceGate::Advance(uint64_t sequence) {
  absl::MutexLock lock(&mu_);
  if (sequence <= applied_) return;
  applied_ = sequence;
  // The gate's thread runs the callbacks: the store calls this with its writers' lock held.
  if (!waiting_.empty()) ++changes_;
}

void SequenceGate::WhenReached(uint64_t sequence, Clock::time_point deadline, Callback done) {
  absl::Status outcome;
  {
    absl::MutexLock lock(&mu_);
    if (sequence <= applied_) {
      outcome = absl::OkStatus();
    } else if (stopping_) {
      outcome = absl::UnavailableError("the server is shutting down");
    } else if (Clock::now() >= deadline) {
      outcome = Behind(applied_, sequence);
    } else {
      waiting_.emplace(deadline, Waiter{sequence, std::move(done)});
      ++changes_;  // the gate's thread may be sleeping past this deadline
      return;
    }
  }
  done(outcome);
}

void SequenceGate::ExpireLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    // Taken before looking, so that a change made while the callbacks run (unlocked) or
    // before the wait starts is never missed: the wait then returns at once.
    const uint64_t seen = changes_;
    // Calls whose sequence is reached run; then those whose deadline passed fail.
    std::vector<std::pair<Callback, absl::Status>> ready;
    for (auto it = waiting_.begin(); it != waiting_.end();) {
      if (it->second.sequence <= applied_) {
        ready.emplace_back(std::move(it->second.done), absl::OkStatus());
        it = waiting_.erase(it);
      } else {
        ++it;
      }
    }
    const Clock::time_point now = Clock::now();
    while (!waiting_.empty() && waiting_.begin()->first <= now) {
      ready.emplace_back(std::move(waiting_.begin()->second.done),
                         Behind(applied_, waiting_.begin()->second.sequence));
      waiting_.erase(waiting_.begin());
    }
    if (!ready.empty()) {
      mu_.Unlock();
      for (auto& [done, status] : ready) done(status);
      mu_.Lock();
    }
    const auto wake = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || changes_ != seen ||
             (!waiting_.empty() && waiting_.begin()->first <= Clock::now());
    };
    if (waiting_.empty()) {
      mu_.Await(absl::Condition(&wake));
    } else {
      mu_.AwaitWithTimeout(absl::Condition(&wake),
                           absl::FromChrono(waiting_.begin()->first - Clock::now()));
    }
  }
}

}  // namespace grail
