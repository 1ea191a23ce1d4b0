// A family the server code was never told about, served through the one interface a family
// implements (ServedFamily, server/scoring/scoring_jobs.h): LinkPredictor scores and ranks
// with its jobs, refuses what it refuses, and the warm-up and GetStats' summary are its own.
// Nothing but this file knows it: a new family touches its model, its jobs and the registry
// (ServedModel's constructors), never the engine, the predictor or rpc.
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/engine/inference_engine.h"
#include "server/scoring/link_predictor.h"
#include "server/scoring/scoring_jobs.h"
#include "server/scoring/served_model.h"
#include "store/triple_store.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

// Never asked for a forward: the double's jobs answer every item themselves.
class NoForwards final : public BatchRunner {
 public:
  const WorkNames& names() const override {
    static const WorkNames names{"fact", "nothing", "nothing to do"};
    return names;
  }
  BatchOutcome Run(absl::Span<const BatchEntry>, ThreadScratch&) const override {
    ADD_FAILURE() << "the double's items are answered by its jobs";
    return {};
  }
};

// Scores a fact by its head's out-degree on the call's snapshot.
class DegreeJob final : public ScoringJob {
 public:
  DegreeJob(const BatchRunner& runner, FactJobSetup setup, LinkPredictor::ScoreCallback done)
      : runner_(runner), setup_(std::move(setup)), done_(std::move(done)) {}
  size_t size() const override { return setup_.facts.size(); }
  absl::StatusOr<std::unique_ptr<WorkItem>> Extract(size_t, ThreadScratch&, int64_t) override {
    return nullptr;  // answered here, in Finish
  }
  const BatchRunner& runner() const override { return runner_; }
  void Finish(absl::Status status) override {
    if (!status.ok()) return done_(status);
    ScoredFacts scored;
    for (const FactToScore& f : setup_.facts) {
      FactScore score;
      score.score = static_cast<float>(setup_.graph->OutEdges(f.head).size());
      scored.scores.push_back(score);
      scored.scored_by.push_back(ScoredBy::kPath);
    }
    scored.graph_sequence = setup_.graph->sequence();
    scored.model_version = setup_.model->version();
    done_(std::move(scored));
  }
  size_t MemoryBytes() const override { return 0; }
  std::string Describe(size_t i) const override { return "fact " + std::to_string(i); }

 private:
  const BatchRunner& runner_;
  FactJobSetup setup_;
  LinkPredictor::ScoreCallback done_;
};

// A ranking it cannot do: its job fails in Prepare.
class NoRankingJob final : public ScoringJob {
 public:
  NoRankingJob(const BatchRunner& runner, LinkPredictor::RankCallback done)
      : runner_(runner), done_(std::move(done)) {}
  absl::Status Prepare() override { return absl::UnimplementedError("the double ranks nothing"); }
  size_t size() const override { return 0; }
  absl::StatusOr<std::unique_ptr<WorkItem>> Extract(size_t, ThreadScratch&, int64_t) override {
    return nullptr;
  }
  const BatchRunner& runner() const override { return runner_; }
  void Finish(absl::Status status) override {
    done_(status.ok() ? absl::StatusOr<Ranking>(Ranking{}) : absl::StatusOr<Ranking>(status));
  }
  size_t MemoryBytes() const override { return 0; }
  std::string Describe(size_t) const override { return "the ranking"; }

 private:
  const BatchRunner& runner_;
  LinkPredictor::RankCallback done_;
};

class DegreeFamily final : public ServedFamily {
 public:
  const std::vector<std::string>& relations() const override { return relations_; }
  ModelSummary Summary() const override {
    ModelSummary summary;
    summary.format = "test-degree/1";
    summary.layers = 0;
    return summary;
  }
  absl::Status CheckExplanations(int explain_paths) const override {
    return explain_paths == 0 ? absl::OkStatus()
                              : absl::InvalidArgumentError("the double explains nothing");
  }
  SubmittedJob FactJob(FactJobSetup setup, int, LinkPredictor::ScoreCallback done) const override {
    const size_t size = setup.facts.size();
    return {std::make_shared<DegreeJob>(runner_, std::move(setup), std::move(done)), size};
  }
  SubmittedJob RankingJob(RankingSetup, LinkPredictor::RankCallback done) const override {
    return {std::make_shared<NoRankingJob>(runner_, std::move(done)), 1};
  }
  absl::StatusOr<int> WarmUp(const ServedModel&, const WarmupInput& input,
                             const WarmupOptions&) const override {
    return static_cast<int>(input.facts.size());
  }

 private:
  const std::vector<std::string> relations_ = {"r1", "r2"};
  const NoForwards runner_;
};

TEST(ServedFamilyTest, AFamilyTheServerWasNeverToldAboutScoresThroughTheOneInterface) {
  ScopedTempDir dir;
  absl::StatusOr<std::unique_ptr<TripleStore>> store = TripleStore::Open(dir.Sub("store"), {});
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->AddChunk({{"a", "r1", "b"}, {"a", "r1", "c"}, {"b", "r2", "c"}}).ok());
  InferenceEngine engine{EngineOptions()};
  auto served = std::make_shared<const ServedModel>(std::make_unique<DegreeFamily>(), "degree.pt",
                                                    "0123456789abcdef", 1);
  LinkPredictor predictor(served, **store, engine, RankLimits());

  auto score = [&](std::vector<NamedTriple> facts, int explain_paths) {
    std::promise<absl::StatusOr<ScoredFacts>> done;
    predictor.Score(
        std::move(facts), std::make_shared<CallControl>(),
        [&done](absl::StatusOr<ScoredFacts> s) { done.set_value(std::move(s)); }, explain_paths);
    return done.get_future().get();
  };
  absl::StatusOr<ScoredFacts> scored =
      score({{"a", "r1", "c"}, {"b", "r2", "c"}, {"c", "r1", "a"}}, 0);
  ASSERT_TRUE(scored.ok()) << scored.status();
  ASSERT_EQ(scored->scores.size(), 3u);
  EXPECT_EQ(scored->scores[0].score, 2);  // a's out-degree
  EXPECT_EQ(scored->scores[1].score, 1);
  EXPECT_EQ(scored->scores[2].score, 0);
  EXPECT_EQ(scored->model_version, served->version());
  EXPECT_THAT(scored->scored_by, ::testing::Each(ScoredBy::kPath));
  // The predictor still resolves names against the model's vocabulary.
  EXPECT_EQ(score({{"a", "r9", "c"}}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(score({{"a", "r1", "c"}}, 2).status().message(),
              ::testing::HasSubstr("the double explains nothing"));

  std::promise<absl::StatusOr<Ranking>> ranked;
  RankQuery query;
  query.fixed = "a";
  query.relation = "r1";
  predictor.Rank(query, std::make_shared<CallControl>(),
                 [&ranked](absl::StatusOr<Ranking> r) { ranked.set_value(std::move(r)); });
  EXPECT_EQ(ranked.get_future().get().status().code(), absl::StatusCode::kUnimplemented);

  EXPECT_EQ(served->Summary().format, "test-degree/1");
  WarmupOptions warmup;
  warmup.batches = 2;
  warmup.batch_size = 3;
  absl::StatusOr<int> forwards = WarmUp(*served, *(*store)->Snapshot(), warmup);
  ASSERT_TRUE(forwards.ok()) << forwards.status();
  EXPECT_GT(*forwards, 0);  // the double's count: the facts it was given
}

}  // namespace
}  // namespace grail
