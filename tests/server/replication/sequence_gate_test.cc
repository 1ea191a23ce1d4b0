// The read-your-writes gate: calls waiting for a graph version run once it is reached, fail
// at their deadline naming the lag, and are never left hanging.
#include "server/replication/sequence_gate.h"

#include <chrono>
#include <future>
#include <memory>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grail {
namespace {

using ::testing::HasSubstr;
using Clock = SequenceGate::Clock;

// A call's outcome, and how many times it was reported.
struct Outcome {
  std::promise<absl::Status> promise;
  std::future<absl::Status> future = promise.get_future();
  int calls = 0;
  SequenceGate::Callback Callback() {
    return [this](absl::Status status) {
      if (++calls == 1) promise.set_value(status);
    };
  }
  bool Done() const {
    return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }
  // Waits (up to a generous bound, never reached when the gate works) for the outcome.
  bool Arrives() const {
    return future.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
  }
};

const Clock::time_point kFarAway = Clock::now() + std::chrono::hours(1);

TEST(SequenceGateTest, ACallForAReachedSequenceRunsAtOnceOnTheCallersThread) {
  SequenceGate gate(5);
  Outcome outcome;
  gate.WhenReached(5, kFarAway, outcome.Callback());
  ASSERT_TRUE(outcome.Done());
  EXPECT_TRUE(outcome.future.get().ok());
  gate.WhenReached(3, kFarAway, outcome.Callback());
  EXPECT_EQ(outcome.calls, 2);
}

TEST(SequenceGateTest, AWaitingCallRunsOnceWhenItsSequenceIsReached) {
  SequenceGate gate(1);
  Outcome outcome;
  gate.WhenReached(4, kFarAway, outcome.Callback());
  gate.Advance(3);
  gate.Advance(2);  // never moves back
  EXPECT_EQ(gate.applied(), 3u);
  // A later call for 3 runs at once: the gate has seen 3, and the call for 4 still waits.
  Outcome at_three;
  gate.WhenReached(3, kFarAway, at_three.Callback());
  ASSERT_TRUE(at_three.Done());
  EXPECT_FALSE(outcome.Done());
  gate.Advance(6);
  ASSERT_TRUE(outcome.Arrives());
  EXPECT_TRUE(outcome.future.get().ok());
  gate.Advance(9);
  EXPECT_EQ(outcome.calls, 1);
}

TEST(SequenceGateTest, AWaitingCallFailsAtItsDeadlineNamingHowFarBehindTheReplicaIs) {
  SequenceGate gate(7);
  Outcome outcome;
  gate.WhenReached(10, Clock::now() + std::chrono::milliseconds(30), outcome.Callback());
  ASSERT_EQ(outcome.future.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  const absl::Status status = outcome.future.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr("up to sequence 7, 3 behind"));
  gate.Advance(10);
  EXPECT_EQ(outcome.calls, 1);
}

TEST(SequenceGateTest, ACallPastItsDeadlineAlreadyFailsAtOnce) {
  SequenceGate gate(0);
  Outcome outcome;
  gate.WhenReached(1, Clock::now() - std::chrono::seconds(1), outcome.Callback());
  ASSERT_TRUE(outcome.Done());
  EXPECT_EQ(outcome.future.get().code(), absl::StatusCode::kUnavailable);
}

TEST(SequenceGateTest, AShortDeadlineArrivingAfterALongOneExpiresFirst) {
  SequenceGate gate(0);
  Outcome long_wait, short_wait;
  gate.WhenReached(1, kFarAway, long_wait.Callback());
  gate.WhenReached(1, Clock::now() + std::chrono::milliseconds(20), short_wait.Callback());
  ASSERT_EQ(short_wait.future.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(short_wait.future.get().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(long_wait.Done());
  gate.Advance(1);
  ASSERT_TRUE(long_wait.Arrives());
  EXPECT_TRUE(long_wait.future.get().ok());
}

TEST(SequenceGateTest, CallsStillWaitingFailUnavailableWhenTheGateGoes) {
  Outcome outcome;
  {
    SequenceGate gate(0);
    gate.WhenReached(2, kFarAway, outcome.Callback());
  }
  ASSERT_TRUE(outcome.Done());
  const absl::Status status = outcome.future.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(status.message()), HasSubstr("shutting down"));
}

}  // namespace
}  // namespace grail
