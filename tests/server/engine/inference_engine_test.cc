#include "server/engine/inference_engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <future>
#include <iterator>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "gtest/gtest.h"
#include "model/grail/fact_scoring.h"
#include "server/scoring/grail_work.h"

namespace grail {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Batched matrix products round differently for different batch shapes, so a score may
// differ from the same fact's score in another batch in the last bits of a float.
bool SameScore(float a, float b) {
  return std::fabs(a - b) <= 1e-5f * std::max(1.0f, std::fabs(b));
}

class RecordingObserver : public EngineObserver {
 public:
  void OnSubgraphExtracted(int nodes, int edges, double seconds) override {
    ++extracted;
    if (on_extracted) on_extracted();
  }
  void OnBatch(int size, int64_t nodes, int64_t edges, double wait, double seconds) override {
    std::lock_guard<std::mutex> lock(mu);
    batch_sizes.push_back(size);
    batch_edges.push_back(edges);
    ++batches;
  }
  void OnWorkDropped(DropReason reason, int64_t subgraphs) override {
    (reason == DropReason::kDeadline ? dropped_by_deadline : dropped_by_cancel) += subgraphs;
  }
  void OnCallRejected(absl::string_view limit) override {
    std::lock_guard<std::mutex> lock(mu);
    rejected.emplace_back(limit);
  }

  std::atomic<int> extracted{0};
  std::atomic<int> batches{0};
  std::atomic<int64_t> dropped_by_deadline{0}, dropped_by_cancel{0};
  std::function<void()> on_extracted;
  std::mutex mu;
  std::vector<int> batch_sizes;
  std::vector<int64_t> batch_edges;
  std::vector<std::string> rejected;
};

// Facts of a StaticGraph (graph ids are model ids); the outcome arrives on a future. An
// optional gate holds Prepare() until opened, so a test can keep a call pending.
class TestJob final : public GrailJob {
 public:
  TestJob(const GrailRunner& runner, std::shared_ptr<const StaticGraph> graph,
          std::vector<Triple> facts)
      : GrailJob(runner),
        graph_(std::move(graph)),
        facts_(std::move(facts)),
        results_(facts_.size()) {}

  absl::Status Prepare() override {
    if (gate_ != nullptr) gate_->WaitForNotification();
    return absl::OkStatus();
  }
  size_t size() const override { return facts_.size(); }
  absl::StatusOr<int32_t> ExtractSubgraph(size_t i, SubgraphExtractor& extractor,
                                          EnclosingSubgraph* out) override {
    const Triple& t = facts_[i];
    absl::Status status = extractor.Extract(*graph_, t.head, t.relation, t.tail, false, out);
    if (!status.ok()) return status;
    return static_cast<int32_t>(t.relation);
  }
  const RelationMap& relations() const override { return identity_; }
  void Accept(size_t i, const FactScore& score) override {
    results_[i] = score;
    // Accept follows the forward's OnBatch: the count names the forward that scored i.
    if (observer != nullptr) forwards.insert(observer->batches.load());
  }
  void Finish(absl::Status status) override {
    finish_order = next_finish.fetch_add(1);
    batches_at_finish = observer != nullptr ? observer->batches.load() : 0;
    if (status.ok()) {
      outcome_.set_value(std::move(results_));
    } else {
      outcome_.set_value(std::move(status));
    }
  }
  size_t MemoryBytes() const override { return memory_bytes; }
  std::string Describe(size_t i) const override { return absl::StrCat("test fact ", i); }

  absl::StatusOr<std::vector<FactScore>> Wait() { return outcome_.get_future().get(); }

  void set_gate(absl::Notification* gate) { gate_ = gate; }
  size_t memory_bytes = 1000;
  RecordingObserver* observer = nullptr;
  int finish_order = -1;
  int batches_at_finish = 0;
  std::set<int> forwards;  // the forwards that scored this job's facts (with an observer)
  static std::atomic<int> next_finish;

 private:
  std::shared_ptr<const StaticGraph> graph_;
  std::vector<Triple> facts_;
  std::vector<FactScore> results_;
  const RelationMap identity_;
  absl::Notification* gate_ = nullptr;
  std::promise<absl::StatusOr<std::vector<FactScore>>> outcome_;
};
std::atomic<int> TestJob::next_finish{0};

class InferenceEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 random(4);
    std::uniform_int_distribution<uint32_t> entity(0, 49), relation(0, 2);
    std::vector<Triple> facts;
    while (facts.size() < 200) {
      const Triple t{entity(random), relation(random), entity(random)};
      if (t.head != t.tail) facts.push_back(t);
    }
    graph_ = std::make_shared<StaticGraph>(50, facts);
    GrailConfig config;
    config.hops = 2;
    absl::StatusOr<std::unique_ptr<GrailModel>> model =
        GrailModel::Create(config, {"a", "b", "c"}, /*seed=*/2);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    runner_ = std::make_unique<GrailRunner>(*model_);
    for (uint32_t i = 0; i < 120; ++i) {
      const uint32_t h = i % 50, t = (i * 17 + 3) % 50;
      if (h != t) queries_.push_back(Triple{h, i % 3, t});
    }
  }

  std::shared_ptr<TestJob> Job(std::vector<Triple> facts) const {
    return std::make_shared<TestJob>(*runner_, graph_, std::move(facts));
  }
  std::vector<Triple> Repeated(size_t n) const {
    std::vector<Triple> out;
    while (out.size() < n) out.push_back(queries_[out.size() % queries_.size()]);
    return out;
  }
  static std::shared_ptr<CallControl> NoDeadline() { return std::make_shared<CallControl>(); }
  static absl::StatusOr<std::vector<FactScore>> ScoreAll(InferenceEngine& engine,
                                                         std::shared_ptr<TestJob> job) {
    engine.Submit(job, NoDeadline(), job->size());
    return job->Wait();
  }

  std::shared_ptr<StaticGraph> graph_;
  std::unique_ptr<GrailModel> model_;
  std::unique_ptr<GrailRunner> runner_;
  std::vector<Triple> queries_;
};

TEST_F(InferenceEngineTest, ConcurrentCallersGetTheOfflineScorersScores) {
  absl::StatusOr<std::vector<float>> expected = ScoreGrailFacts(
      *model_, *graph_, {}, queries_, GrailScoringOptions{/*batch_size=*/1, /*threads=*/1});
  ASSERT_TRUE(expected.ok());
  RecordingObserver observer;
  EngineOptions options;
  options.max_batch_size = 16;
  options.extraction_threads = 2;
  InferenceEngine engine(options, &observer);
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 6; ++c) {
    callers.emplace_back([&, c] {
      // Each caller scores a different slice, several times.
      for (int round = 0; round < 3; ++round) {
        const size_t begin = (c * 13 + round * 5) % queries_.size();
        const size_t end = std::min(queries_.size(), begin + 10 + c * 7);
        std::vector<Triple> slice(queries_.begin() + begin, queries_.begin() + end);
        absl::StatusOr<std::vector<FactScore>> scores = ScoreAll(engine, Job(slice));
        if (!scores.ok() || scores->size() != slice.size()) {
          ++failures;
          continue;
        }
        for (size_t i = 0; i < slice.size(); ++i) {
          mismatches += !SameScore((*scores)[i].score, (*expected)[begin + i]);
        }
      }
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
  std::lock_guard<std::mutex> lock(observer.mu);
  int total = 0;
  for (int size : observer.batch_sizes) {
    EXPECT_LE(size, 16);
    total += size;
  }
  EXPECT_EQ(total, observer.extracted.load());
}

TEST_F(InferenceEngineTest, ReportsSubgraphSizesAndWhetherTheFactIsKnown) {
  InferenceEngine engine(EngineOptions{});
  const Triple known = graph_->OutEdges(0).empty() ? Triple{0, 0, 1}
                                                   : Triple{0, graph_->OutEdges(0)[0].relation,
                                                            graph_->OutEdges(0)[0].entity};
  absl::StatusOr<std::vector<FactScore>> scores = ScoreAll(engine, Job({known}));
  ASSERT_TRUE(scores.ok());
  EXPECT_EQ((*scores)[0].known_fact, graph_->HasFact(known.head, known.relation, known.tail));
  SubgraphExtractor extractor(model_->config().extraction());
  EnclosingSubgraph subgraph;
  ASSERT_TRUE(
      extractor.Extract(*graph_, known.head, known.relation, known.tail, false, &subgraph).ok());
  EXPECT_EQ((*scores)[0].subgraph_nodes, subgraph.num_nodes());
  EXPECT_EQ((*scores)[0].subgraph_edges, subgraph.num_edges());
}

TEST_F(InferenceEngineTest, AFactTheExtractionRefusesFailsItsCallOnly) {
  InferenceEngine engine(EngineOptions{});
  std::vector<Triple> facts = queries_;
  facts[7].tail = facts[7].head;
  absl::StatusOr<std::vector<FactScore>> scores = ScoreAll(engine, Job(facts));
  EXPECT_EQ(scores.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(scores.status().message(), HasSubstr("fact 7"));
  EXPECT_TRUE(ScoreAll(engine, Job(queries_)).ok());
}

// The engine's fairness: a call of one fact, submitted while a large call is being scored,
// is finished first, after at most about one forward of the large call (its queue is not
// served first). Counts, not times.
TEST_F(InferenceEngineTest, ASmallCallWaitsBehindAtMostAboutOneBatchOfALargeOne) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_batch_size = 16;
  options.extraction_threads = 2;
  InferenceEngine engine(options, &observer);
  std::shared_ptr<TestJob> large = Job(Repeated(4000));
  large->observer = &observer;
  engine.Submit(large, NoDeadline(), large->size());
  while (observer.batches.load() < 2) std::this_thread::yield();
  const int batches_before = observer.batches.load();
  std::shared_ptr<TestJob> small = Job({queries_[3]});
  small->observer = &observer;
  engine.Submit(small, NoDeadline(), 1);
  ASSERT_TRUE(small->Wait().ok());
  ASSERT_TRUE(large->Wait().ok());
  EXPECT_LT(small->finish_order, large->finish_order);
  // The forward under way when it arrived, possibly the one already formed, then its own.
  EXPECT_LE(small->batches_at_finish - batches_before, 3);
  EXPECT_GE(large->batches_at_finish - small->batches_at_finish, 200);  // 4000 / 16 - 3...
}

// Two large calls submitted together are interleaved: each progresses, neither waits for
// the other to finish.
TEST_F(InferenceEngineTest, ConcurrentLargeCallsShareTheForwards) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_batch_size = 16;
  InferenceEngine engine(options, &observer);
  std::shared_ptr<TestJob> first = Job(Repeated(2000));
  std::shared_ptr<TestJob> second = Job(Repeated(2000));
  first->observer = second->observer = &observer;
  engine.Submit(first, NoDeadline(), first->size());
  engine.Submit(second, NoDeadline(), second->size());
  ASSERT_TRUE(first->Wait().ok());
  ASSERT_TRUE(second->Wait().ok());
  const int total = observer.batches.load();
  // Served one after the other, the first would end after half the forwards.
  EXPECT_GT(std::min(first->batches_at_finish, second->batches_at_finish), total * 3 / 4);
}

TEST_F(InferenceEngineTest, SubgraphsOfDifferentCallsShareOneForward) {
  // Dynamic batching: while a large call keeps the model busy, a small call's subgraphs join
  // the large call's next forward instead of waiting for a forward of their own.
  RecordingObserver observer;
  EngineOptions options;
  options.max_batch_size = 16;
  InferenceEngine engine(options, &observer);
  std::shared_ptr<TestJob> large = Job(Repeated(400));
  std::shared_ptr<TestJob> small = Job(Repeated(3));
  large->observer = small->observer = &observer;
  engine.Submit(large, NoDeadline(), large->size());
  engine.Submit(small, NoDeadline(), small->size());
  ASSERT_TRUE(large->Wait().ok());
  ASSERT_TRUE(small->Wait().ok());
  std::vector<int> shared;
  std::set_intersection(large->forwards.begin(), large->forwards.end(), small->forwards.begin(),
                        small->forwards.end(), std::back_inserter(shared));
  EXPECT_FALSE(shared.empty()) << "no forward held subgraphs of both calls";
}

TEST_F(InferenceEngineTest, ExpiredDeadlineDropsTheWorkAndCountsIt) {
  RecordingObserver observer;
  InferenceEngine engine(EngineOptions{}, &observer);
  std::shared_ptr<TestJob> job = Job(Repeated(500));
  engine.Submit(job, std::make_shared<CallControl>(EngineClock::now() - std::chrono::seconds(1)),
                job->size());
  absl::StatusOr<std::vector<FactScore>> outcome = job->Wait();
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kDeadlineExceeded);
  // Dropped before extraction: nothing of it was extracted or run.
  EXPECT_EQ(observer.extracted.load(), 0);
  EXPECT_EQ(observer.dropped_by_deadline.load(), 500);
  EXPECT_TRUE(ScoreAll(engine, Job(queries_)).ok());
  EXPECT_EQ(engine.Load().pending_subgraphs, 0);
}

TEST_F(InferenceEngineTest, ADeadlinePassingMidwayFinishesTheCallAtOnce) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_batch_size = 16;
  options.extraction_threads = 1;
  InferenceEngine engine(options, &observer);
  std::shared_ptr<TestJob> job = Job(Repeated(60000));
  engine.Submit(job,
                std::make_shared<CallControl>(EngineClock::now() + std::chrono::milliseconds(50)),
                job->size());
  EXPECT_EQ(job->Wait().status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GT(observer.dropped_by_deadline.load(), 0);
  EXPECT_LT(observer.extracted.load(), 60000);
  EXPECT_EQ(engine.Load().calls, 0);
}

TEST_F(InferenceEngineTest, CancellingStopsTheRemainingWork) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_batch_size = 16;
  options.extraction_threads = 1;
  InferenceEngine engine(options, &observer);
  auto control = std::make_shared<CallControl>();
  observer.on_extracted = [&] {
    if (observer.extracted.load() == 1) control->Cancel();
  };
  std::shared_ptr<TestJob> job = Job(Repeated(60000));
  engine.Submit(job, control, job->size());
  EXPECT_EQ(job->Wait().status().code(), absl::StatusCode::kCancelled);
  observer.on_extracted = nullptr;
  EXPECT_LT(observer.extracted.load(), 1000);
  EXPECT_GT(observer.dropped_by_cancel.load(), 59000);
  EXPECT_TRUE(ScoreAll(engine, Job(queries_)).ok());
}

TEST_F(InferenceEngineTest, AdmissionRefusesWorkBeyondThePendingLimitAndKeepsServing) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_pending_subgraphs = 100;
  options.max_caller_share = 1;  // the global limit, whoever calls
  InferenceEngine engine(options, &observer);
  absl::Notification gate;
  std::shared_ptr<TestJob> held = Job(Repeated(80));
  held->set_gate(&gate);  // pending until the gate opens
  engine.Submit(held, NoDeadline(), held->size());
  EXPECT_EQ(engine.Load().pending_subgraphs, 80);

  std::shared_ptr<TestJob> refused = Job(Repeated(30));
  engine.Submit(refused, NoDeadline(), refused->size());
  absl::StatusOr<std::vector<FactScore>> outcome = refused->Wait();
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(outcome.status().message(), HasSubstr("--max-pending-subgraphs"));
  {
    std::lock_guard<std::mutex> lock(observer.mu);
    EXPECT_THAT(observer.rejected, ::testing::ElementsAre("max_pending_subgraphs"));
  }
  // A call whose size is only known after Prepare() is checked then.
  std::shared_ptr<TestJob> unknown_size = Job(Repeated(30));
  engine.Submit(unknown_size, NoDeadline(), /*known_size=*/0);
  EXPECT_EQ(unknown_size->Wait().status().code(), absl::StatusCode::kResourceExhausted);

  gate.Notify();
  EXPECT_TRUE(held->Wait().ok());
  EXPECT_TRUE(ScoreAll(engine, Job(Repeated(30))).ok());
  EXPECT_EQ(engine.Load().pending_subgraphs, 0);
}

TEST_F(InferenceEngineTest, AdmissionRefusesACallBeyondTheQueuedBytes) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_queued_bytes = 1 << 20;
  InferenceEngine engine(options, &observer);
  std::shared_ptr<TestJob> big = Job(queries_);
  big->memory_bytes = 2 << 20;
  engine.Submit(big, NoDeadline(), big->size());
  absl::StatusOr<std::vector<FactScore>> outcome = big->Wait();
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(outcome.status().message(), HasSubstr("--max-queued-bytes"));
  EXPECT_TRUE(ScoreAll(engine, Job(queries_)).ok());
}

// A call that alone exceeds a limit could never be admitted: it is told so, not "busy,
// retry" (a top_k of 10^8 was refused as busy on an idle server).
TEST_F(InferenceEngineTest, ACallThatCouldNeverBeAdmittedIsToldToNarrowNotToRetry) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_queued_bytes = 4 << 20;
  options.max_pending_subgraphs = 100;
  InferenceEngine engine(options, &observer);
  std::shared_ptr<TestJob> huge = Job(queries_);
  huge->memory_bytes = 3 << 20;  // under the limit, over one caller's half of it
  engine.Submit(huge, NoDeadline(), huge->size());
  absl::Status status = huge->Wait().status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("it can never be admitted: narrow the call"));
  EXPECT_THAT(status.message(), HasSubstr("--max-caller-share"));
  EXPECT_THAT(status.message(), Not(HasSubstr("retry")));
  std::shared_ptr<TestJob> many = Job(Repeated(60));
  engine.Submit(many, NoDeadline(), many->size());
  status = many->Wait().status();
  EXPECT_THAT(status.message(), HasSubstr("this call alone adds 60 subgraphs"));
  EXPECT_THAT(status.message(), Not(HasSubstr("retry")));
  EXPECT_TRUE(ScoreAll(engine, Job(Repeated(10))).ok());  // the engine is idle and serving
}

// One caller holding its share waits for its own calls; another caller is still admitted.
TEST_F(InferenceEngineTest, ACallerOverItsShareIsRefusedWhileOthersAreAdmitted) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_pending_subgraphs = 100;
  options.max_caller_share = 0.5;
  InferenceEngine engine(options, &observer);
  auto as = [](const std::string& caller) {
    auto control = std::make_shared<CallControl>();
    control->set_caller(caller);
    return control;
  };
  absl::Notification gate;
  std::shared_ptr<TestJob> held = Job(Repeated(40));
  held->set_gate(&gate);
  engine.Submit(held, as("flooder"), held->size());
  std::shared_ptr<TestJob> more = Job(Repeated(20));
  engine.Submit(more, as("flooder"), more->size());
  const absl::Status refused = more->Wait().status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.message(), HasSubstr("retry when its earlier calls have finished"));
  {
    std::lock_guard<std::mutex> lock(observer.mu);
    EXPECT_THAT(observer.rejected, ::testing::ElementsAre("max_caller_share"));
  }
  // Another caller: 40 + 30 is within the global limit of 100 and within its own half.
  std::shared_ptr<TestJob> victim = Job(Repeated(30));
  engine.Submit(victim, as("victim"), victim->size());
  gate.Notify();
  EXPECT_TRUE(victim->Wait().ok());
  EXPECT_TRUE(held->Wait().ok());
  // Once its calls have finished, the flooder's share is whole again.
  std::shared_ptr<TestJob> again = Job(Repeated(45));
  engine.Submit(again, as("flooder"), again->size());
  EXPECT_TRUE(again->Wait().ok());
  EXPECT_EQ(engine.Load().pending_subgraphs, 0);
}

TEST_F(InferenceEngineTest, ForwardsCloseAtTheirEdgeBudget) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_batch_edges = 60;
  InferenceEngine engine(options, &observer);
  // Subgraphs that fit, each on its own, in 60 edges.
  SubgraphExtractor extractor(model_->config().extraction());
  std::vector<Triple> fitting;
  for (const Triple& q : queries_) {
    EnclosingSubgraph s;
    ASSERT_TRUE(extractor.Extract(*graph_, q.head, q.relation, q.tail, false, &s).ok());
    if (s.num_edges() <= 60) fitting.push_back(q);
  }
  ASSERT_GT(fitting.size(), 20u);
  ASSERT_TRUE(ScoreAll(engine, Job(fitting)).ok());
  std::lock_guard<std::mutex> lock(observer.mu);
  EXPECT_GT(observer.batch_edges.size(), 1u);
  for (int64_t edges : observer.batch_edges) EXPECT_LE(edges, 60);
}

TEST_F(InferenceEngineTest, ASubgraphAboveTheSizeLimitFailsItsCallNamingTheLimit) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_subgraph_edges = 3;
  InferenceEngine engine(options, &observer);
  SubgraphExtractor extractor(model_->config().extraction());
  Triple large{}, small{};
  bool found_large = false, found_small = false;
  for (uint32_t h = 0; h < 50 && !(found_large && found_small); ++h) {
    for (uint32_t t = 0; t < 50; ++t) {
      if (h == t) continue;
      EnclosingSubgraph s;
      ASSERT_TRUE(extractor.Extract(*graph_, h, 0, t, false, &s).ok());
      if (s.num_edges() > 3 && !found_large) large = {h, 0, t}, found_large = true;
      if (s.num_edges() <= 3 && !found_small) small = {h, 0, t}, found_small = true;
    }
  }
  ASSERT_TRUE(found_large && found_small);
  absl::StatusOr<std::vector<FactScore>> refused = ScoreAll(engine, Job({small, large}));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("test fact 1"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--max-subgraph-edges=3"));
  EXPECT_TRUE(ScoreAll(engine, Job({small})).ok());
  std::lock_guard<std::mutex> lock(observer.mu);
  EXPECT_THAT(observer.rejected, ::testing::ElementsAre("max_subgraph_edges"));
}

TEST_F(InferenceEngineTest, ASubgraphLargerThanTheBatchBudgetRunsAlone) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_batch_edges = 3;
  InferenceEngine engine(options, &observer);
  SubgraphExtractor extractor(model_->config().extraction());
  std::vector<Triple> large;
  for (const Triple& q : queries_) {
    EnclosingSubgraph s;
    ASSERT_TRUE(extractor.Extract(*graph_, q.head, q.relation, q.tail, false, &s).ok());
    if (s.num_edges() > 3) large.push_back(q);
  }
  ASSERT_GT(large.size(), 3u);
  ASSERT_TRUE(ScoreAll(engine, Job(large)).ok());
  std::lock_guard<std::mutex> lock(observer.mu);
  EXPECT_THAT(observer.batch_sizes, ::testing::Each(1));
}

TEST_F(InferenceEngineTest, ExtractionRunsAtMostAboutTwoForwardsAhead) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_batch_size = 8;
  options.extraction_threads = 2;
  InferenceEngine engine(options, &observer);
  std::atomic<int64_t> most_queued{0};
  observer.on_extracted = [&] {
    const int64_t queued = engine.Load().queued_subgraphs;
    int64_t seen = most_queued.load();
    while (queued > seen && !most_queued.compare_exchange_weak(seen, queued)) {
    }
  };
  std::vector<std::shared_ptr<TestJob>> jobs;
  for (int c = 0; c < 5; ++c) {
    jobs.push_back(Job(Repeated(600)));
    engine.Submit(jobs.back(), NoDeadline(), jobs.back()->size());
  }
  for (auto& job : jobs) EXPECT_TRUE(job->Wait().ok());
  observer.on_extracted = nullptr;
  // Two forwards of 8, plus what the two threads hold in their hands (a slice each).
  EXPECT_LE(most_queued.load(), 2 * 8 + 2 * 8);
  EXPECT_GT(most_queued.load(), 0);
}

TEST_F(InferenceEngineTest, AfterShutdownCallsAreUnavailable) {
  InferenceEngine engine(EngineOptions{});
  engine.Shutdown();
  engine.Shutdown();  // idempotent
  EXPECT_EQ(ScoreAll(engine, Job(queries_)).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(InferenceEngineTest, NoFactsNoWork) {
  InferenceEngine engine(EngineOptions{});
  absl::StatusOr<std::vector<FactScore>> scores = ScoreAll(engine, Job({}));
  ASSERT_TRUE(scores.ok());
  EXPECT_TRUE(scores->empty());
}

// A family the engine has never heard of: items of a given size whose "score" is their
// index, run by a runner that counts what it was handed. The engine schedules it with the
// same policies, never sharing a forward between two runners.
class TallyItem final : public WorkItem {
 public:
  explicit TallyItem(int64_t size) : size_(size) {}
  int64_t nodes() const override { return size_; }
  int64_t edges() const override { return size_; }
  int64_t bytes() const override { return 64; }

 private:
  const int64_t size_;
};

class TallyRunner final : public BatchRunner {
 public:
  const WorkNames& names() const override { return names_; }
  BatchOutcome Run(absl::Span<const BatchEntry> batch, ThreadScratch& scratch) const override;
  mutable std::mutex mu;
  mutable std::vector<std::set<const ScoringJob*>> forwards;  // the jobs in each forward

 private:
  const WorkNames names_{"tally", "the tally", "make it smaller"};
};

class TallyJob final : public ScoringJob {
 public:
  TallyJob(const TallyRunner& runner, std::vector<int64_t> sizes)
      : runner_(runner), sizes_(std::move(sizes)), results_(sizes_.size(), -1) {}
  size_t size() const override { return sizes_.size(); }
  absl::StatusOr<std::unique_ptr<WorkItem>> Extract(size_t i, ThreadScratch& scratch,
                                                    int64_t max_nodes) override {
    // Per-thread state a family keeps: this thread's count of extractions.
    int* count = scratch.Find<int>();
    if (count == nullptr) count = &scratch.Emplace<int>(0);
    ++*count;
    return std::make_unique<TallyItem>(sizes_[i]);
  }
  const BatchRunner& runner() const override { return runner_; }
  void Finish(absl::Status status) override {
    if (status.ok()) {
      outcome_.set_value(results_);
    } else {
      outcome_.set_value(std::move(status));
    }
  }
  size_t MemoryBytes() const override { return 100; }
  std::string Describe(size_t i) const override { return absl::StrCat("tally ", i); }
  void Accept(size_t i) { results_[i] = static_cast<int64_t>(i); }
  absl::StatusOr<std::vector<int64_t>> Wait() { return outcome_.get_future().get(); }

 private:
  const TallyRunner& runner_;
  const std::vector<int64_t> sizes_;
  std::vector<int64_t> results_;
  std::promise<absl::StatusOr<std::vector<int64_t>>> outcome_;
};

BatchOutcome TallyRunner::Run(absl::Span<const BatchEntry> batch, ThreadScratch& scratch) const {
  BatchOutcome outcome;
  std::set<const ScoringJob*> jobs;
  for (const BatchEntry& entry : batch) {
    static_cast<TallyJob&>(*entry.job).Accept(entry.index);
    outcome.nodes += entry.item->nodes();
    outcome.edges += entry.item->edges();
    jobs.insert(entry.job);
  }
  std::lock_guard<std::mutex> lock(mu);
  forwards.push_back(std::move(jobs));
  return outcome;
}

TEST(EngineFamilyTest, AFamilyThatIsNotGrailsPlugsInThroughItsItemsAndRunner) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_batch_edges = 100;
  options.max_subgraph_nodes = 1000;
  InferenceEngine engine(options, &observer);
  TallyRunner first, second;
  std::vector<std::shared_ptr<TallyJob>> jobs;
  for (int j = 0; j < 6; ++j) {
    jobs.push_back(
        std::make_shared<TallyJob>(j % 2 == 0 ? first : second, std::vector<int64_t>(20, 10 + j)));
  }
  for (const auto& job : jobs) engine.Submit(job, std::make_shared<CallControl>(), job->size());
  for (const auto& job : jobs) {
    absl::StatusOr<std::vector<int64_t>> results = job->Wait();
    ASSERT_TRUE(results.ok()) << results.status();
    for (size_t i = 0; i < results->size(); ++i) EXPECT_EQ((*results)[i], static_cast<int64_t>(i));
  }
  // Each forward held one runner's items only, within the edge budget.
  for (const TallyRunner* runner : {&first, &second}) {
    std::lock_guard<std::mutex> lock(runner->mu);
    for (const std::set<const ScoringJob*>& forward : runner->forwards) {
      for (const ScoringJob* job : forward) EXPECT_EQ(&job->runner(), runner);
    }
  }
  std::lock_guard<std::mutex> lock(observer.mu);
  for (int64_t edges : observer.batch_edges) EXPECT_LE(edges, 100);
  EXPECT_EQ(observer.extracted.load(), 120);
}

TEST(EngineFamilyTest, AnItemOverTheSizeLimitIsNamedInTheFamilysWords) {
  InferenceEngine engine(EngineOptions{});
  TallyRunner runner;
  auto job = std::make_shared<TallyJob>(runner, std::vector<int64_t>{5, 70000});
  engine.Submit(job, std::make_shared<CallControl>(), job->size());
  absl::StatusOr<std::vector<int64_t>> results = job->Wait();
  EXPECT_EQ(results.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(results.status().message(), HasSubstr("tally 1: the tally has 70000 nodes"));
  EXPECT_THAT(results.status().message(), HasSubstr("make it smaller"));
}

}  // namespace
}  // namespace grail
