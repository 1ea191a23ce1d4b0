// Online evaluation against the real grail-server (--online-eval-rate): the facts AddTriples
// brings are ranked against every entity on the graph they arrive at, and /metrics gives their
// ranks, MRR and Hits@10 exactly as RankTails and RankHeads rank them on that graph; facts
// that cannot be ranked are counted apart.
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/ring_graph.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/served_archive.h"

namespace grail {
namespace {

const std::vector<std::string> kRelations = {"r0", "r1", "r2"};

class OnlineEvaluationTest : public ServedArchiveFixture {
 protected:
  void SetUp() override {
    ASSERT_TRUE(SaveUntrainedPathModel(dir_.Sub("path.pt"), kRelations, 4, /*layers=*/3).ok());
    StartServer(dir_.Sub("path.pt"), {"--online-eval-rate=1", "--online-eval-cpu-share=1"});
    Add(RingFacts(40, kRelations));  // every entity new: nothing ranked
  }

  // The answer's rank among every candidate of (fixed, relation, ?) (or its inverse),
  // filtered, as RankTails or RankHeads gives them now: 1 + those above + half those level.
  double RankNow(bool tails, const std::string& fixed, const std::string& relation,
                 const std::string& answer) {
    kg::v1::RankOptions options;
    options.set_filter_known_facts(true);
    kg::v1::RankResponse response;
    const grpc::Status status = RankCall(*stub_, tails, fixed, relation, options, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    float score = 0;
    bool found = false;
    for (const kg::v1::RankedEntity& r : response.ranked()) {
      if (r.entity() == answer) score = r.score(), found = true;
    }
    EXPECT_TRUE(found) << answer;
    double higher = 0, level = 0;
    for (const kg::v1::RankedEntity& r : response.ranked()) {
      if (r.entity() == answer) continue;
      higher += r.score() > score;
      level += r.score() == score;
    }
    return 1 + higher + level / 2;
  }

  // The online evaluation's series, for failure messages.
  std::string OnlineSeries() {
    std::string out;
    for (absl::string_view line : absl::StrSplit(ScrapeMetrics(server_.metrics_port()), '\n')) {
      if (absl::StrContains(line, "online") && !absl::StartsWith(line, "#")) {
        absl::StrAppend(&out, line, "\n");
      }
    }
    return out;
  }

  // The metric `series` once it reaches at least `value` (the rankings end after the chunk's
  // acknowledgement), or its last value after a minute.
  double Await(const std::string& series, double value) {
    double seen = -1;
    for (int i = 0; i < 100; ++i) {
      seen = ScrapedMetric(server_.metrics_port(), series);
      if (seen >= value) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return seen;
  }
};

TEST_F(OnlineEvaluationTest, AddedFactsAreRankedOnTheGraphTheyArriveAtAsRankingCallsRankThem) {
  // Facts between existing entities that the ring does not hold.
  const std::vector<NamedTriple> added = {
      {"c0", "r0", "c5"}, {"c3", "r1", "c11"}, {"c20", "r2", "c7"}};
  std::vector<double> expected;
  for (const NamedTriple& f : added) {
    expected.push_back(RankNow(true, f.head, f.relation, f.tail));
    expected.push_back(RankNow(false, f.tail, f.relation, f.head));
  }
  double mrr = 0, hits = 0;
  for (double rank : expected) {
    mrr += 1 / rank / expected.size();
    hits += (rank <= 10 ? 1.0 : 0.0) / expected.size();
  }
  Add(added);
  const std::string version = R"(\{model_version="[^"]+"\})";
  ASSERT_EQ(Await("grail_online_window_ranks" + version, 6), 6) << OnlineSeries();
  EXPECT_EQ(ScrapedMetric(server_.metrics_port(), "grail_online_rank_count" + version), 6);
  EXPECT_NEAR(ScrapedMetric(server_.metrics_port(), "grail_online_mrr" + version), mrr, 1e-6);
  EXPECT_NEAR(ScrapedMetric(server_.metrics_port(), "grail_online_hits_at_10" + version), hits,
              1e-9);
  // The ring's own facts were all between new entities.
  EXPECT_EQ(ScrapedMetric(server_.metrics_port(),
                          R"(grail_online_eval_skipped_total\{reason="new_entity"\})"),
            2 * 64);  // 64 facts of the ring's chunk were sampled, at most a chunk

  // A fact with a new entity cannot be ranked; one the graph holds is filtered away.
  Add({{"c0", "r0", "fresh"}});
  EXPECT_EQ(Await(R"(grail_online_eval_skipped_total\{reason="new_entity"\})", 2 * 64 + 2),
            2 * 64 + 2);
  Add({{"c0", "r0", "c5"}});
  EXPECT_EQ(Await(R"(grail_online_eval_skipped_total\{reason="known"\})", 2), 2);
  EXPECT_EQ(ScrapedMetric(server_.metrics_port(), "grail_online_window_ranks" + version), 6);
}

}  // namespace
}  // namespace grail
