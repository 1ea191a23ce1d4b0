#include "client/load_generator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grail {
namespace {

using ::testing::Contains;
using ::testing::Not;

TEST(RunLoadTest, IssuesEveryRequestOnceAndMeasuresOnlyThoseAfterTheWarmup) {
  std::mutex mu;
  std::multiset<int64_t> issued;
  std::atomic<int> warmups_done{0};
  std::atomic<bool> measured_before_warmup_done{false};
  LoadOptions options;
  options.concurrency = 3;
  options.warmup = 5;
  options.requests = 20;
  const LoadResult result = RunLoad(options, [&](int64_t i) {
    {
      std::lock_guard<std::mutex> lock(mu);
      issued.insert(i);
    }
    if (i < 5) {
      ++warmups_done;
      return grpc::StatusCode::OK;
    }
    if (warmups_done.load() != 5) measured_before_warmup_done = true;
    return i % 4 == 0 ? grpc::StatusCode::NOT_FOUND : grpc::StatusCode::OK;
  });
  std::multiset<int64_t> expected;
  for (int64_t i = 0; i < 25; ++i) expected.insert(i);
  EXPECT_EQ(issued, expected);
  EXPECT_FALSE(measured_before_warmup_done);
  EXPECT_EQ(result.requests, 20);
  EXPECT_EQ(result.latency_ms.count, 20u);
  // Measured indices 5..24: 8, 12, 16, 20, 24 fail.
  EXPECT_EQ(result.errors, 5);
  EXPECT_EQ(result.status_counts.at("OK"), 15);
  EXPECT_EQ(result.status_counts.at("NOT_FOUND"), 5);
  EXPECT_GT(result.requests_per_second, 0);
}

TEST(RunLoadTest, RunsTheCallersConcurrently) {
  std::atomic<int> running{0};
  std::atomic<int> most_running{0};
  LoadOptions options;
  options.concurrency = 4;
  options.requests = 40;
  RunLoad(options, [&](int64_t) {
    const int now = ++running;
    int seen = most_running.load();
    while (now > seen && !most_running.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    --running;
    return grpc::StatusCode::OK;
  });
  EXPECT_GT(most_running.load(), 1);
  EXPECT_LE(most_running.load(), 4);
}

std::vector<SourceTriple> SixEntityFacts() {
  return {{"a", "r", "b"}, {"b", "r", "c"}, {"c", "s", "d"}, {"d", "r", "e"}, {"e", "s", "f"}};
}

TEST(LoadWorkloadTest, RequestsDependOnlyOnSeedAndIndex) {
  const LoadWorkload one(SixEntityFacts(), 7, 3);
  const LoadWorkload same(SixEntityFacts(), 7, 3);
  const LoadWorkload other(SixEntityFacts(), 8, 3);
  int differ = 0;
  for (int64_t i = 0; i < 50; ++i) {
    kg::v1::RankTailsRequest a, b, c;
    one.RankTailsRequest(i, 0, &a);
    same.RankTailsRequest(i, 0, &b);
    other.RankTailsRequest(i, 0, &c);
    EXPECT_EQ(a.SerializeAsString(), b.SerializeAsString());
    differ += a.SerializeAsString() != c.SerializeAsString();
  }
  EXPECT_GT(differ, 0);
}

TEST(LoadWorkloadTest, ScoreRequestsAreFactsOfTheFile) {
  const LoadWorkload workload(SixEntityFacts(), 1, 0);
  std::set<std::string> heads;
  for (int64_t i = 0; i < 100; ++i) {
    kg::v1::ScoreTripletRequest request;
    workload.ScoreRequest(i, &request);
    const kg::v1::Triple& t = request.triple();
    EXPECT_THAT(SixEntityFacts(), Contains(SourceTriple{t.head(), t.relation(), t.tail()}));
    heads.insert(t.head());
  }
  EXPECT_EQ(heads.size(), 5u) << "100 uniform draws cover all 5 facts";
}

// Zipf heads: the head with the most facts is asked most, the rank-k head about 1/k as often
// as the first, and every request is still a fact of the file.
TEST(LoadWorkloadTest, ZipfHeadsAskThePopularHeadsMostOften) {
  std::vector<SourceTriple> facts;
  for (int h = 0; h < 20; ++h) {
    for (int f = 0; f <= h; ++f) {  // head h20-ish has the most facts
      facts.push_back({"h" + std::to_string(h), "r", "t" + std::to_string(f)});
    }
  }
  const LoadWorkload workload(facts, /*seed=*/3, 0, /*zipf_heads=*/1);
  std::map<std::string, int> asked;
  for (int64_t i = 0; i < 20000; ++i) {
    kg::v1::ScoreTripletRequest request;
    workload.ScoreRequest(i, &request);
    const kg::v1::Triple& t = request.triple();
    ASSERT_THAT(facts, Contains(SourceTriple{t.head(), t.relation(), t.tail()}));
    ++asked[t.head()];
  }
  // Popularity ranks: h19 first (20 facts), h18 second, ..., h0 last.
  EXPECT_GT(asked["h19"], asked["h18"]);
  EXPECT_GT(asked["h18"], asked["h9"]);
  EXPECT_GT(asked["h9"], asked["h0"]);
  // P(rank 1) / P(rank 2) = 2 under s = 1.
  EXPECT_NEAR(static_cast<double>(asked["h19"]) / asked["h18"], 2.0, 0.25);
  const LoadWorkload uniform(facts, /*seed=*/3, 0);
  int first = 0;
  for (int64_t i = 0; i < 20000; ++i) {
    kg::v1::ScoreTripletRequest request;
    uniform.ScoreRequest(i, &request);
    first += request.triple().head() == "h19";
  }
  EXPECT_NEAR(first / 20000.0, 20.0 / 210, 0.02);  // its share of the facts
}

TEST(LoadWorkloadTest, RankCandidatesAreDistinctHoldTheTrueTailAndNeverTheHead) {
  const LoadWorkload workload(SixEntityFacts(), 3, 4);
  EXPECT_EQ(workload.num_entities(), 6u);
  for (int64_t i = 0; i < 50; ++i) {
    kg::v1::RankTailsRequest request;
    workload.RankTailsRequest(i, 2, &request);
    const std::vector<std::string> candidates(request.options().candidates().begin(),
                                              request.options().candidates().end());
    ASSERT_EQ(candidates.size(), 4u);
    EXPECT_EQ(std::set<std::string>(candidates.begin(), candidates.end()).size(), 4u);
    EXPECT_THAT(candidates, Not(Contains(request.head())));
    EXPECT_EQ(request.options().top_k(), 2u);
    bool has_true_tail = false;
    for (const SourceTriple& t : SixEntityFacts()) {
      if (t.head == request.head() && t.relation == request.relation()) {
        has_true_tail |=
            std::find(candidates.begin(), candidates.end(), t.tail) != candidates.end();
      }
    }
    EXPECT_TRUE(has_true_tail);
  }
}

TEST(LoadWorkloadTest, CandidatesAreCappedByTheEntitiesAvailable) {
  const LoadWorkload workload({{"a", "r", "b"}, {"b", "r", "c"}}, 1, 50);
  kg::v1::RankTailsRequest request;
  workload.RankTailsRequest(0, 0, &request);
  EXPECT_EQ(request.options().candidates_size(), 2);  // every entity but the head
}

TEST(LoadWorkloadTest, ZeroCandidatesRanksEveryEntity) {
  const LoadWorkload workload(SixEntityFacts(), 1, 0);
  kg::v1::RankTailsRequest request;
  workload.RankTailsRequest(0, 0, &request);
  EXPECT_EQ(request.options().candidates_size(), 0);
}

}  // namespace
}  // namespace grail
