// A fusion archive (GraIL + a KGE model, late fusion) served by the real grail-server binary
// (loopback port, real RocksDB directory, real gRPC): facts whose entities and relation the KGE
// model knows get the fused score, facts with an entity added at runtime fall back to GraIL
// alone, responses and /metrics say which, and the scores equal grail-eval's on the same
// archive and graph. Rankings over every entity fuse the far candidates with embeddings one by
// one and give the same scores as ScoreTriplet. An early-fused GraIL archive (node features)
// reads each entity's features by name, as grail-eval does, and ranks each far candidate with
// features apart.
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "model/fusion/fusion_model.h"
#include "model/grail/grail_model.h"
#include "model/kge/kge_model.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/ring_graph.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/served_archive.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using kg::v1::KnowledgeGraph;

const std::vector<std::string> kRelations = {"r0", "r1", "r2"};
constexpr int kRing = 60;
constexpr int kEmbedded = 50;  // the KGE model knows c0..c49 and relations r0, r1

// A ring of entities c0..c59, each linked to the next two: with GraIL's 2 hops, a candidate
// more than 3 hops from the fixed entity has the trivial enclosing subgraph.
std::vector<NamedTriple> Ring() { return RingFacts(kRing, kRelations); }

bool Embedded(const std::string& entity) {
  return entity[0] == 'c' && std::stoi(entity.substr(1)) < kEmbedded;
}

// A served archive on the ring: the helpers both kinds of fusion use.
class ServedArchiveTest : public ServedArchiveFixture {
 protected:
  // Starts grail-server on the archive at `archive` and stores the ring.
  void Serve(const std::string& archive) {
    archive_ = archive;
    StartServer(archive_);
    Add(Ring());
  }

  std::vector<kg::v1::ScoreTripletResponse> Score(const std::vector<NamedTriple>& facts) {
    grpc::ClientContext context;
    kg::v1::ScoreTripletsRequest request;
    for (const NamedTriple& f : facts) *request.add_triples() = ToProto(f);
    kg::v1::ScoreTripletsResponse response;
    const grpc::Status status = stub_->ScoreTriplets(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return {response.results().begin(), response.results().end()};
  }

  kg::v1::RankResponse Rank(bool tails, const std::string& fixed, const std::string& relation,
                            uint32_t top_k = 0) {
    kg::v1::RankResponse response;
    kg::v1::RankOptions options;
    options.set_top_k(top_k);
    const grpc::Status status = RankCall(*stub_, tails, fixed, relation, options, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  // ScoreTriplet of each fact a ranking of (fixed, relation, ?) or (?, relation, fixed) ranked.
  std::vector<kg::v1::ScoreTripletResponse> ScoreRanked(bool tails, const std::string& fixed,
                                                        const std::string& relation,
                                                        const kg::v1::RankResponse& ranking) {
    std::vector<NamedTriple> facts;
    for (const kg::v1::RankedEntity& e : ranking.ranked()) {
      facts.push_back(tails ? NamedTriple{fixed, relation, e.entity()}
                            : NamedTriple{e.entity(), relation, fixed});
    }
    return Score(facts);
  }

  // grail-eval --score-only on the same archive, with the stored facts as the graph: each of
  // `facts` (none of them stored) with its score and scorer, in order.
  std::vector<std::pair<float, std::string>> GrailEvalScores(
      const std::vector<NamedTriple>& facts) {
    auto write = [](const std::string& path, const std::vector<NamedTriple>& triples) {
      std::ofstream out(path);
      for (const NamedTriple& t : triples)
        out << t.head << '\t' << t.relation << '\t' << t.tail << '\n';
    };
    write(dir_.Sub("graph.txt"), stored_);
    write(dir_.Sub("test.txt"), facts);
    const BinaryRun run = RunBinary(
        "grail-eval",
        absl::StrCat("--model ", archive_, " --graph ", dir_.Sub("graph.txt"), " --test ",
                     dir_.Sub("test.txt"), " --score-only --scores-out ", dir_.Sub("scores.txt")));
    EXPECT_EQ(run.exit_code, 0) << run.all();
    std::vector<std::pair<float, std::string>> scores;
    std::ifstream in(dir_.Sub("scores.txt"));
    for (std::string line; std::getline(in, line);) {
      // A fusion archive's lines name the scorer; a GraIL archive's are GraIL's.
      const std::vector<std::string> columns = absl::StrSplit(line, '\t');
      EXPECT_TRUE(columns.size() == 4 || columns.size() == 5) << line;
      if (columns.size() == 4) scores.push_back({std::stof(columns[3]), "grail"});
      if (columns.size() == 5) scores.push_back({std::stof(columns[3]), columns[4]});
    }
    return scores;
  }

  std::string archive_;
};

class FusedServingTest : public ServedArchiveTest {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<GrailModel>> grail =
        GrailModel::Create(TwoHopConfig(), kRelations, /*seed=*/2);
    ASSERT_TRUE(grail.ok()) << grail.status();
    KgeConfig config;
    config.kind = KgeKind::kDistMult;
    config.dim = 8;
    std::vector<std::string> entities;
    for (int i = 0; i < kEmbedded; ++i) entities.push_back(absl::StrCat("c", i));
    absl::StatusOr<std::unique_ptr<KgeModel>> kge =
        KgeModel::Create(config, entities, {"r0", "r1"}, /*seed=*/5);
    ASSERT_TRUE(kge.ok()) << kge.status();
    std::vector<std::unique_ptr<KgeModel>> members;
    members.push_back(*std::move(kge));
    absl::StatusOr<std::unique_ptr<FusionModel>> fused =
        FusionModel::Create(*std::move(grail), std::move(members), LinearFusion{{0.8, 1.5}, 0.3},
                            LinearFusion{{0.9}, -0.2});
    ASSERT_TRUE(fused.ok()) << fused.status();
    ASSERT_TRUE((*fused)->Save(dir_.Sub("fused.pt")).ok());
    Serve(dir_.Sub("fused.pt"));
  }
};

TEST_F(FusedServingTest, KnownEntitiesAreFusedAnAddedEntityFallsBackToGrailAsGrailEvalScores) {
  // An entity the KGE model never saw, added while serving.
  Add({{"new1", "r0", "c10"}, {"c11", "r1", "new1"}});
  const std::vector<NamedTriple> facts = {
      {"c10", "r0", "c14"},   // both entities and the relation embedded: fused
      {"c10", "r1", "c40"},   // far apart, embedded: fused
      {"c10", "r2", "c13"},   // a relation the KGE model lacks: GraIL
      {"new1", "r1", "c12"},  // the added entity: GraIL
      {"c52", "r0", "c10"},   // an entity outside the KGE model's vocabulary: GraIL
  };
  const std::vector<kg::v1::ScoredBy> expected = {kg::v1::SCORED_BY_FUSED, kg::v1::SCORED_BY_FUSED,
                                                  kg::v1::SCORED_BY_GRAIL, kg::v1::SCORED_BY_GRAIL,
                                                  kg::v1::SCORED_BY_GRAIL};
  const std::vector<kg::v1::ScoreTripletResponse> served = Score(facts);
  const std::vector<std::pair<float, std::string>> offline = GrailEvalScores(facts);
  ASSERT_EQ(served.size(), facts.size());
  ASSERT_EQ(offline.size(), facts.size());
  for (size_t i = 0; i < facts.size(); ++i) {
    const std::string what =
        absl::StrCat(facts[i].head, " ", facts[i].relation, " ", facts[i].tail);
    EXPECT_EQ(served[i].scored_by(), expected[i]) << what;
    EXPECT_EQ(offline[i].second, expected[i] == kg::v1::SCORED_BY_FUSED ? "fused" : "grail")
        << what;
    ExpectClose(served[i].score(), offline[i].first, what);
    EXPECT_NEAR(served[i].probability(), 1 / (1 + std::exp(-served[i].score())), 1e-6) << what;
  }

  // /metrics counts the scores by scorer.
  EXPECT_EQ(ScrapedMetric(server_.metrics_port(), R"(grail_scores_total\{scored_by="fused"\})"), 2);
  EXPECT_EQ(ScrapedMetric(server_.metrics_port(), R"(grail_scores_total\{scored_by="grail"\})"), 3);

  // GetStats describes the archive and its KGE model.
  grpc::ClientContext context;
  kg::v1::GetStatsResponse stats;
  ASSERT_TRUE(stub_->GetStats(&context, kg::v1::GetStatsRequest(), &stats).ok());
  EXPECT_EQ(stats.model().format(), kFusionModelFormat);
  EXPECT_EQ(stats.model().hops(), 2u);
  ASSERT_EQ(stats.model().kge_models_size(), 1);
  EXPECT_EQ(stats.model().kge_models(0).kind(), "distmult");
  EXPECT_EQ(stats.model().kge_models(0).entities(), static_cast<uint32_t>(kEmbedded));
  EXPECT_EQ(stats.model().kge_models(0).relations(), 2u);
  EXPECT_DOUBLE_EQ(stats.model().kge_models(0).weight(), 1.5);
}

TEST_F(FusedServingTest, RankingEveryEntityFusesEachEmbeddedCandidateAsScoreTripletDoes) {
  for (const bool tails : {true, false}) {
    SCOPED_TRACE(tails ? "RankTails" : "RankHeads");
    const kg::v1::RankResponse all = Rank(tails, "c10", "r1");
    ASSERT_EQ(all.ranked_size(), kRing - 1);
    // Within 3 hops of c10: c4..c16. The far candidates with embeddings are fused one by one;
    // only the far ones without (c50..c59) share GraIL's trivial-subgraph score.
    EXPECT_EQ(all.candidates_shared_score(), static_cast<uint32_t>(kRing - kEmbedded));
    const std::vector<kg::v1::ScoreTripletResponse> scored = ScoreRanked(tails, "c10", "r1", all);
    ASSERT_EQ(scored.size(), static_cast<size_t>(all.ranked_size()));
    std::map<float, int> shared;  // score -> candidates with it, among those not fused
    for (int i = 0; i < all.ranked_size(); ++i) {
      const kg::v1::RankedEntity& e = all.ranked(i);
      EXPECT_EQ(e.scored_by(),
                Embedded(e.entity()) ? kg::v1::SCORED_BY_FUSED : kg::v1::SCORED_BY_GRAIL)
          << e.entity();
      EXPECT_EQ(e.scored_by(), scored[i].scored_by()) << e.entity();
      ExpectClose(e.score(), scored[i].score(), e.entity());
      if (i > 0) {
        EXPECT_GE(all.ranked(i - 1).score(), e.score());
      }
      if (!Embedded(e.entity())) ++shared[e.score()];
    }
    ASSERT_EQ(shared.size(), 1u);  // c50..c59 share one score
    EXPECT_EQ(shared.begin()->second, kRing - kEmbedded);

    // The best 5 alone are the first 5 of the whole ranking.
    const kg::v1::RankResponse top = Rank(tails, "c10", "r1", 5);
    ASSERT_EQ(top.ranked_size(), 5);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(top.ranked(i).entity(), all.ranked(i).entity());
      EXPECT_EQ(top.ranked(i).score(), all.ranked(i).score());
    }
  }

  // A relation the KGE model lacks: nothing is fused, and every far candidate shares one score.
  const kg::v1::RankResponse unfused = Rank(true, "c10", "r2");
  for (const kg::v1::RankedEntity& e : unfused.ranked()) {
    EXPECT_EQ(e.scored_by(), kg::v1::SCORED_BY_GRAIL) << e.entity();
  }
  EXPECT_EQ(unfused.candidates_shared_score(), static_cast<uint32_t>(kRing - 1 - 12));
}

// Early fusion (GraIL++): a GraIL archive whose nodes read fixed features of c0..c49, listed
// in reverse so that a feature row is never the graph's id. Served, every score is GraIL's
// and reads each entity's features by name; an entity added at runtime has none (zeros and the
// flag bit), as in grail-eval.
class EarlyFusionServingTest : public ServedArchiveTest {
 protected:
  void SetUp() override {
    NodeFeatures features;
    features.dim = 4;
    for (int i = kEmbedded - 1; i >= 0; --i) {
      features.entities.push_back(absl::StrCat("c", i));
      for (int k = 0; k < features.dim; ++k) {
        features.values.push_back(std::sin(static_cast<float>(7 * i + k)));
      }
    }
    GrailConfig config = TwoHopConfig();
    config.node_feature_dim = features.dim;
    absl::StatusOr<std::unique_ptr<GrailModel>> grail =
        GrailModel::Create(config, kRelations, /*seed=*/4, "cpu", &features);
    ASSERT_TRUE(grail.ok()) << grail.status();
    ASSERT_TRUE((*grail)->Save(dir_.Sub("early.pt")).ok());
    Serve(dir_.Sub("early.pt"));
  }
};

TEST_F(EarlyFusionServingTest, ScoresReadEachEntitysFeaturesByNameAsGrailEvalDoes) {
  Add({{"new1", "r0", "c10"}, {"c11", "r1", "new1"}});
  const std::vector<NamedTriple> facts = {
      {"c10", "r0", "c14"},   // both with features
      {"c10", "r1", "c40"},   // far apart: the trivial subgraph, with c40's features
      {"c10", "r1", "c41"},   // likewise, with c41's
      {"new1", "r1", "c12"},  // the added entity: no features
      {"c52", "r0", "c10"},   // an entity without features
  };
  const std::vector<kg::v1::ScoreTripletResponse> served = Score(facts);
  const std::vector<std::pair<float, std::string>> offline = GrailEvalScores(facts);
  ASSERT_EQ(served.size(), facts.size());
  ASSERT_EQ(offline.size(), facts.size());
  for (size_t i = 0; i < facts.size(); ++i) {
    const std::string what =
        absl::StrCat(facts[i].head, " ", facts[i].relation, " ", facts[i].tail);
    EXPECT_EQ(served[i].scored_by(), kg::v1::SCORED_BY_GRAIL) << what;
    EXPECT_EQ(offline[i].second, "grail") << what;
    ExpectClose(served[i].score(), offline[i].first, what);
  }
  // Two far candidates' trivial subgraphs differ only in their features.
  EXPECT_NE(served[1].score(), served[2].score());
}

TEST_F(EarlyFusionServingTest, RankingEveryEntityScoresEachFarCandidateWithFeaturesApart) {
  for (const bool tails : {true, false}) {
    SCOPED_TRACE(tails ? "RankTails" : "RankHeads");
    const kg::v1::RankResponse all = Rank(tails, "c10", "r1");
    ASSERT_EQ(all.ranked_size(), kRing - 1);
    // Only the far candidates without features (c50..c59) share one score.
    EXPECT_EQ(all.candidates_shared_score(), static_cast<uint32_t>(kRing - kEmbedded));
    const std::vector<kg::v1::ScoreTripletResponse> scored = ScoreRanked(tails, "c10", "r1", all);
    ASSERT_EQ(scored.size(), static_cast<size_t>(all.ranked_size()));
    std::map<float, int> without_features;  // score -> candidates with it
    for (int i = 0; i < all.ranked_size(); ++i) {
      const kg::v1::RankedEntity& e = all.ranked(i);
      EXPECT_EQ(e.scored_by(), kg::v1::SCORED_BY_GRAIL) << e.entity();
      ExpectClose(e.score(), scored[i].score(), e.entity());
      if (i > 0) {
        EXPECT_GE(all.ranked(i - 1).score(), e.score());
      }
      if (!Embedded(e.entity())) ++without_features[e.score()];
    }
    ASSERT_EQ(without_features.size(), 1u);
    EXPECT_EQ(without_features.begin()->second, kRing - kEmbedded);

    const kg::v1::RankResponse top = Rank(tails, "c10", "r1", 5);
    ASSERT_EQ(top.ranked_size(), 5);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(top.ranked(i).entity(), all.ranked(i).entity());
  }
}

}  // namespace
}  // namespace grail
