#include "server/inference_engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/fact_scoring.h"
#include "storage/static_graph.h"

namespace grail {
namespace {

// Batched matrix products round differently for different batch shapes, so a score may
// differ from the same fact's score in another batch in the last bits of a float.
bool SameScore(float a, float b) {
  return std::fabs(a - b) <= 1e-5f * std::max(1.0f, std::fabs(b));
}

class RecordingObserver : public EngineObserver {
 public:
  void OnSubgraphExtracted(int nodes, int edges, double seconds) override { ++extracted; }
  void OnBatch(int size, double wait, double seconds) override {
    std::lock_guard<std::mutex> lock(mu);
    batch_sizes.push_back(size);
  }
  std::atomic<int> extracted{0};
  std::mutex mu;
  std::vector<int> batch_sizes;
};

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
    for (uint32_t i = 0; i < 120; ++i) {
      const uint32_t h = i % 50, t = (i * 17 + 3) % 50;
      if (h != t) queries_.push_back(Triple{h, i % 3, t});
    }
  }

  ScoringGraph Graph() const {
    return ScoringGraph{graph_, std::make_shared<const RelationMap>(RelationMap{0, 1, 2})};
  }
  static std::vector<ScoringFact> ToScoring(const std::vector<Triple>& facts) {
    std::vector<ScoringFact> out;
    for (const Triple& t : facts) {
      out.push_back(ScoringFact{t.head, t.relation, t.tail, static_cast<int32_t>(t.relation)});
    }
    return out;
  }
  static absl::StatusOr<std::vector<FactScore>> ScoreAll(InferenceEngine& engine,
                                                         const ScoringGraph& graph,
                                                         const std::vector<ScoringFact>& facts) {
    return engine.Score(
        graph, facts, [] { return false; }, [] { return absl::CancelledError("cancelled"); });
  }

  std::shared_ptr<StaticGraph> graph_;
  std::unique_ptr<GrailModel> model_;
  std::vector<Triple> queries_;
};

TEST_F(InferenceEngineTest, ConcurrentCallersGetTheOfflineScorersScores) {
  absl::StatusOr<std::vector<float>> expected =
      ScoreFacts(*model_, *graph_, {}, queries_, ScoringOptions{/*batch_size=*/1, /*threads=*/1});
  ASSERT_TRUE(expected.ok());
  RecordingObserver observer;
  EngineOptions options;
  options.max_batch_size = 16;
  options.extraction_threads = 2;
  InferenceEngine engine(*model_, options, &observer);
  const std::vector<ScoringFact> facts = ToScoring(queries_);
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 6; ++c) {
    callers.emplace_back([&, c] {
      // Each caller scores a different slice, several times.
      for (int round = 0; round < 3; ++round) {
        const size_t begin = (c * 13 + round * 5) % facts.size();
        const size_t end = std::min(facts.size(), begin + 10 + c * 7);
        std::vector<ScoringFact> slice(facts.begin() + begin, facts.begin() + end);
        absl::StatusOr<std::vector<FactScore>> scores = ScoreAll(engine, Graph(), slice);
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
  InferenceEngine engine(*model_, EngineOptions{});
  const Triple known = graph_->OutEdges(0).empty() ? Triple{0, 0, 1}
                                                   : Triple{0, graph_->OutEdges(0)[0].relation,
                                                            graph_->OutEdges(0)[0].entity};
  absl::StatusOr<std::vector<FactScore>> scores = ScoreAll(engine, Graph(), ToScoring({known}));
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
  InferenceEngine engine(*model_, EngineOptions{});
  std::vector<ScoringFact> facts = ToScoring(queries_);
  facts[7].tail = facts[7].head;
  absl::StatusOr<std::vector<FactScore>> scores = ScoreAll(engine, Graph(), facts);
  EXPECT_EQ(scores.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(scores.status().message(), ::testing::HasSubstr("fact 7"));
  EXPECT_TRUE(ScoreAll(engine, Graph(), ToScoring(queries_)).ok());
}

TEST_F(InferenceEngineTest, CancelledCallReturnsItsStatusAndTheEngineGoesOn) {
  InferenceEngine engine(*model_, EngineOptions{});
  std::vector<ScoringFact> many;
  for (int k = 0; k < 50; ++k) {
    const std::vector<ScoringFact> facts = ToScoring(queries_);
    many.insert(many.end(), facts.begin(), facts.end());
  }
  absl::StatusOr<std::vector<FactScore>> cancelled = engine.Score(
      Graph(), many, [] { return true; }, [] { return absl::DeadlineExceededError("too late"); });
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(ScoreAll(engine, Graph(), ToScoring(queries_)).ok());
}

TEST_F(InferenceEngineTest, CancellingStopsTheRemainingWork) {
  RecordingObserver observer;
  EngineOptions options;
  options.max_batch_size = 16;
  options.max_queued_subgraphs = 64;  // extraction cannot run far ahead of the model
  options.extraction_threads = 1;
  InferenceEngine engine(*model_, options, &observer);
  std::vector<ScoringFact> many;
  while (many.size() < 60000) {
    const std::vector<ScoringFact> facts = ToScoring(queries_);
    many.insert(many.end(), facts.begin(), facts.end());
  }
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    while (observer.extracted.load() == 0) std::this_thread::yield();
    cancel = true;
  });
  absl::StatusOr<std::vector<FactScore>> cancelled = engine.Score(
      Graph(), many, [&] { return cancel.load(); }, [] { return absl::CancelledError("gone"); });
  canceller.join();
  EXPECT_EQ(cancelled.status().code(), absl::StatusCode::kCancelled);
  // Once a later call is answered, the engine has dropped the cancelled call's queue.
  ASSERT_TRUE(ScoreAll(engine, Graph(), ToScoring(queries_)).ok());
  EXPECT_LT(observer.extracted.load(), static_cast<int>(many.size()) / 2);
}

TEST_F(InferenceEngineTest, AfterShutdownCallsAreUnavailable) {
  InferenceEngine engine(*model_, EngineOptions{});
  engine.Shutdown();
  engine.Shutdown();  // idempotent
  EXPECT_EQ(ScoreAll(engine, Graph(), ToScoring(queries_)).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(InferenceEngineTest, NoFactsNoWork) {
  InferenceEngine engine(*model_, EngineOptions{});
  absl::StatusOr<std::vector<FactScore>> scores = ScoreAll(engine, Graph(), {});
  ASSERT_TRUE(scores.ok());
  EXPECT_TRUE(scores->empty());
}

}  // namespace
}  // namespace grail
