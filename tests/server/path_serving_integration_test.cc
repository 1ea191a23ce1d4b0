// The path-based scorer served by the real grail-server binary (loopback port, real RocksDB
// directory, real gRPC): scores equal the offline model's, ranking every entity is one pass
// whose scores equal ScoreTriplet's, RankHeads is the inverse query, and added facts reach
// the next pass.
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "model/kge/kge_model.h"
#include "model/path/path_batch.h"
#include "model/path/path_model.h"
#include "model/ultra/ultra_model.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/ring_graph.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/served_archive.h"
#include "tests/testing/server_process.h"
#include "tests/testing/small_ultra.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using kg::v1::KnowledgeGraph;
using ::testing::HasSubstr;

const std::vector<std::string> kRelations = {"r0", "r1", "r2"};

// A long ring of entities c0..c59, each linked to the next two: with a radius of 3 hops, most
// of the ring lies beyond any query's neighbourhood.
std::vector<NamedTriple> Ring() { return RingFacts(60, kRelations); }

class PathServingTest : public ServedArchiveFixture {
 protected:
  // A 3-layer model with the reach mask (the default).
  virtual PathConfig Config() const {
    PathConfig config;
    config.num_layers = 3;
    config.dim = 8;
    return config;
  }

  void SetUp() override {
    absl::StatusOr<std::unique_ptr<PathModel>> model = PathModel::Create(Config(), kRelations, 4);
    ASSERT_TRUE(model.ok()) << model.status();
    ASSERT_TRUE((*model)->Save(dir_.Sub("path.pt")).ok());
    model_ = *std::move(model);
    StartServer(dir_.Sub("path.pt"));
    Add(Ring());
  }

  // Every entity's offline score for the query (source, relation, ?), inverse for heads.
  std::map<std::string, float> Offline(const std::string& source, const std::string& relation,
                                       bool inverse) {
    IndexedTriples indexed;
    IndexTriples(stored_, &indexed);
    const StaticGraph graph(indexed.entities.size(), indexed.triples);
    const RelationMap relations = MapRelationsByName(indexed.relations.names(), kRelations);
    PathBatchBuilder builder(graph, relations, model_->num_relations(), model_->config().radius());
    PathBatch batch;
    const int32_t r = static_cast<int32_t>(
        std::find(kRelations.begin(), kRelations.end(), relation) - kRelations.begin());
    EXPECT_TRUE(builder
                    .Add({*indexed.entities.Find(source),
                          r + (inverse ? model_->num_relations() : 0),
                          {},
                          std::nullopt},
                         &batch)
                    .ok());
    absl::StatusOr<PathScores> scores = model_->Score(batch);
    EXPECT_TRUE(scores.ok()) << scores.status();
    std::map<std::string, float> out;
    for (EntityId e = 0; e < graph.num_entities(); ++e) {
      out[indexed.entities.Name(e)] = scores->Of(batch, 0, e);
    }
    return out;
  }

  kg::v1::ScoreTripletResponse Score(const NamedTriple& t, grpc::Status* status_out = nullptr,
                                     bool explain = false) {
    grpc::ClientContext context;
    kg::v1::ScoreTripletRequest request;
    *request.mutable_triple() = ToProto(t);
    request.set_explain(explain);
    kg::v1::ScoreTripletResponse response;
    const grpc::Status status = stub_->ScoreTriplet(&context, request, &response);
    if (status_out != nullptr) {
      *status_out = status;
    } else {
      EXPECT_TRUE(status.ok()) << status.error_message();
    }
    return response;
  }

  kg::v1::RankResponse RankTails(const std::string& head, const std::string& relation) {
    grpc::ClientContext context;
    kg::v1::RankTailsRequest request;
    request.set_head(head);
    request.set_relation(relation);
    kg::v1::RankResponse response;
    const grpc::Status status = stub_->RankTails(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  std::unique_ptr<PathModel> model_;
};

TEST_F(PathServingTest, ScoresEqualTheOfflineModelAndStatsNameThePathFormat) {
  const std::map<std::string, float> offline = Offline("c10", "r1", false);
  for (const char* tail : {"c11", "c12", "c13", "c40"}) {
    const kg::v1::ScoreTripletResponse served = Score({"c10", "r1", tail});
    ExpectClose(served.score(), offline.at(tail), tail);
  }
  // c40 is far from c10: it has the query's shared far score, as c41 does.
  EXPECT_EQ(Score({"c10", "r1", "c40"}).score(), Score({"c10", "r1", "c41"}).score());
  EXPECT_TRUE(Score({"c10", "r1", "c11"}).known_fact() || Score({"c10", "r0", "c11"}).known_fact());

  grpc::ClientContext context;
  kg::v1::GetStatsResponse stats;
  ASSERT_TRUE(stub_->GetStats(&context, kg::v1::GetStatsRequest(), &stats).ok());
  EXPECT_EQ(stats.model().format(), kPathModelFormat);
  EXPECT_EQ(stats.model().hops(), 3u);
  EXPECT_EQ(stats.model().parameters(), static_cast<uint64_t>(model_->num_parameters()));

  // Explanations are GraIL's: a path model says so rather than returning none.
  grpc::Status explain;
  Score({"c10", "r1", "c12"}, &explain, /*explain=*/true);
  EXPECT_EQ(explain.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(explain.error_message(), HasSubstr("path-family"));
}

TEST_F(PathServingTest, RankingEveryTailIsOnePassWhoseScoresEqualScoreTriplet) {
  const kg::v1::RankResponse ranking = RankTails("c20", "r2");
  ASSERT_EQ(ranking.ranked_size(), 59);  // every entity but c20
  EXPECT_EQ(ranking.candidates_scored(), 59u);
  // The neighbourhood within 3 hops of c20 along the ring holds 12 others; the remaining 47
  // share the far score.
  EXPECT_EQ(ranking.candidates_shared_score(), 47u);
  const std::map<std::string, float> offline = Offline("c20", "r2", false);
  for (int i = 0; i < ranking.ranked_size(); ++i) {
    const kg::v1::RankedEntity& e = ranking.ranked(i);
    ExpectClose(e.score(), offline.at(e.entity()), e.entity());
    if (i > 0) {
      EXPECT_GE(ranking.ranked(i - 1).score(), e.score());
    }
  }
  // Each score is ScoreTriplet's for the completed fact.
  for (int i : {0, 5, 30, 58}) {
    const kg::v1::RankedEntity& e = ranking.ranked(i);
    ExpectClose(Score({"c20", "r2", e.entity()}).score(), e.score(), e.entity());
  }
}

TEST_F(PathServingTest, RankHeadsIsTheInverseQuery) {
  grpc::ClientContext context;
  kg::v1::RankHeadsRequest request;
  request.set_relation("r0");
  request.set_tail("c33");
  request.mutable_options()->set_top_k(10);
  kg::v1::RankResponse ranking;
  ASSERT_TRUE(stub_->RankHeads(&context, request, &ranking).ok());
  ASSERT_EQ(ranking.ranked_size(), 10);
  const std::map<std::string, float> offline = Offline("c33", "r0", /*inverse=*/true);
  for (const kg::v1::RankedEntity& e : ranking.ranked()) {
    ExpectClose(e.score(), offline.at(e.entity()), e.entity());
  }
}

TEST_F(PathServingTest, AFactAddedWhileServingReachesTheNextPass) {
  const kg::v1::RankResponse before = RankTails("c0", "r0");
  // A new entity linked to c0: inside c0's neighbourhood from the next call on.
  Add({{"c0", "r2", "fresh"}});
  const kg::v1::RankResponse after = RankTails("c0", "r0");
  EXPECT_GT(after.graph_sequence(), before.graph_sequence());
  EXPECT_EQ(after.ranked_size(), before.ranked_size() + 1);
  EXPECT_EQ(after.candidates_shared_score(), before.candidates_shared_score());
  const std::map<std::string, float> offline = Offline("c0", "r0", false);
  bool found = false;
  for (const kg::v1::RankedEntity& e : after.ranked()) {
    if (e.entity() != "fresh") continue;
    found = true;
    ExpectClose(e.score(), offline.at("fresh"), "fresh");
  }
  EXPECT_TRUE(found);
}

// A reload may switch families: the calls after it are scored by the other family.
TEST_F(PathServingTest, ReloadingSwitchesBetweenTheFamiliesWhileServing) {
  ASSERT_TRUE(SaveUntrainedModel(dir_.Sub("grail.pt"), kRelations, 2, TwoHopConfig()).ok());
  for (const std::string& archive : {dir_.Sub("grail.pt"), dir_.Sub("path.pt")}) {
    grpc::ClientContext context;
    kg::v1::ReloadModelRequest request;
    request.set_path(archive);
    kg::v1::ReloadModelResponse response;
    const grpc::Status status = stub_->ReloadModel(&context, request, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    const bool grail = archive == dir_.Sub("grail.pt");
    EXPECT_EQ(response.model().format(), grail ? kGrailModelFormat : kPathModelFormat);
    // Explanations exist for GraIL only; both score and rank.
    grpc::Status explain;
    Score({"c10", "r1", "c12"}, &explain, /*explain=*/true);
    EXPECT_EQ(explain.ok(), grail) << explain.error_message();
    EXPECT_EQ(RankTails("c10", "r1").ranked_size(), 59);
  }
  ExpectClose(Score({"c10", "r1", "c12"}).score(), Offline("c10", "r1", false).at("c12"), "c12");

  // A KGE archive alone is refused by name, and the path model keeps serving.
  KgeConfig kge;
  kge.dim = 4;
  std::unique_ptr<KgeModel> embeddings =
      *KgeModel::Create(kge, {"c10", "c12"}, {"r0", "r1"}, /*seed=*/1);
  ASSERT_TRUE(embeddings->Save(dir_.Sub("kge.pt")).ok());
  grpc::ClientContext context;
  kg::v1::ReloadModelRequest request;
  request.set_path(dir_.Sub("kge.pt"));
  kg::v1::ReloadModelResponse response;
  const grpc::Status refused = stub_->ReloadModel(&context, request, &response);
  EXPECT_FALSE(refused.ok());
  EXPECT_THAT(refused.error_message(), HasSubstr("is a KGE model"));
  ExpectClose(Score({"c10", "r1", "c12"}).score(), Offline("c10", "r1", false).at("c12"), "c12");
}

// Reloading to an ULTRA model, which scores any relation: it warms up on the stored facts,
// and a relation the learned model's store refused is accepted and ranked from then on.
TEST_F(PathServingTest, ReloadingToUltraAcceptsRelationsTheLearnedModelRefused) {
  const std::vector<NamedTriple> novel = {{"c3", "brand_new", "c9"}, {"c9", "brand_new", "c20"}};
  EXPECT_FALSE(AddChunks(*stub_, {novel}).status.ok());
  ASSERT_TRUE(SaveSmallUltra(dir_.Sub("ultra.pt"), 3).ok());
  grpc::ClientContext context;
  kg::v1::ReloadModelRequest request;
  request.set_path(dir_.Sub("ultra.pt"));
  kg::v1::ReloadModelResponse response;
  const grpc::Status status = stub_->ReloadModel(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.model().format(), kUltraModelFormat);
  Add(novel);
  EXPECT_EQ(RankTails("c3", "brand_new").ranked_size(), 59);
  EXPECT_EQ(RankTails("c3", "r1").ranked_size(), 59);
}

// Without the reach mask (NBFNet's computation, with PNA) a ranking covers the whole ring and
// scores every entity on its own surroundings; ScoreTriplet runs on the tail's 3-hop ball
// only, and still gives each fact the ranking's score.
class UnmaskedPathServingTest : public PathServingTest {
 protected:
  PathConfig Config() const override {
    PathConfig config = PathServingTest::Config();
    config.reach_mask = false;
    config.pna = true;
    return config;
  }

  // Near and far tails (c40 is 10 hops along the ring): each fact on its tail's ball, a
  // small part of the 60 entities, with the ranking's score.
  void ExpectScoreTripletOnTheTailsBallEqualsTheWholeGraphRanking() {
    const kg::v1::RankResponse ranking = RankTails("c20", "r2");
    ASSERT_EQ(ranking.ranked_size(), 59);
    EXPECT_EQ(ranking.candidates_shared_score(), 0u);
    const std::map<std::string, float> offline = Offline("c20", "r2", false);
    for (const kg::v1::RankedEntity& e : ranking.ranked()) {
      ExpectClose(e.score(), offline.at(e.entity()), e.entity());
    }
    for (int i : {0, 5, 30, 58}) {
      const kg::v1::RankedEntity& e = ranking.ranked(i);
      const kg::v1::ScoreTripletResponse served = Score({"c20", "r2", e.entity()});
      ExpectClose(served.score(), e.score(), e.entity());
      EXPECT_LT(served.subgraph_nodes(), 30u) << e.entity();
    }
    const kg::v1::ScoreTripletResponse far = Score({"c20", "r2", "c40"});
    ExpectClose(far.score(), offline.at("c40"), "c40");
    EXPECT_LT(far.subgraph_nodes(), 30u);
  }
};

TEST_F(UnmaskedPathServingTest, ScoreTripletReadsTheTailsBallAndEqualsTheWholeGraphRanking) {
  ExpectScoreTripletOnTheTailsBallEqualsTheWholeGraphRanking();
}

// With the reach feature the score also reads whether the head reaches the tail within 3
// facts; the tail's ball still decides it (a shortest path of at most 3 facts lies in it).
class ReachFeaturePathServingTest : public UnmaskedPathServingTest {
 protected:
  PathConfig Config() const override {
    PathConfig config = UnmaskedPathServingTest::Config();
    config.reach_feature = true;
    return config;
  }
};

TEST_F(ReachFeaturePathServingTest, ScoreTripletOfNearAndFarTailsEqualsTheWholeGraphRanking) {
  ExpectScoreTripletOnTheTailsBallEqualsTheWholeGraphRanking();
}

// A path model (3 layers, the reach mask) served on the ring with `flags`.
class LimitedPathServer {
 public:
  explicit LimitedPathServer(const std::vector<std::string>& flags, bool priority = false) {
    PathConfig config;
    config.num_layers = 3;
    config.dim = 8;
    config.priority = priority;
    EXPECT_TRUE((*PathModel::Create(config, kRelations, 4))->Save(dir_.Sub("path.pt")).ok());
    std::vector<std::string> args = {"--model=" + dir_.Sub("path.pt"),
                                     "--data-dir=" + dir_.Sub("store")};
    args.insert(args.end(), flags.begin(), flags.end());
    started_ = server_.Start(args, dir_.Sub("server.log"));
    stub_ = KnowledgeGraph::NewStub(
        grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
    if (started_) {
      EXPECT_TRUE(AddChunks(*stub_, {Ring()}).status.ok());
    }
  }
  bool started() const { return started_; }

  grpc::Status RankTails(const std::string& head, const std::string& relation,
                         const kg::v1::RankOptions& options, kg::v1::RankResponse* response) {
    grpc::ClientContext context;
    kg::v1::RankTailsRequest request;
    request.set_head(head);
    request.set_relation(relation);
    *request.mutable_options() = options;
    return stub_->RankTails(&context, request, response);
  }
  grpc::Status Score(const NamedTriple& fact, kg::v1::ScoreTripletResponse* response) {
    grpc::ClientContext context;
    kg::v1::ScoreTripletRequest request;
    *request.mutable_triple() = ToProto(fact);
    return stub_->ScoreTriplet(&context, request, response);
  }
  KnowledgeGraph::Stub& stub() { return *stub_; }
  double Metric(const std::string& series) { return ScrapedMetric(server_.metrics_port(), series); }

 private:
  ScopedTempDir dir_;
  ServerProcess server_;
  bool started_ = false;
  std::unique_ptr<KnowledgeGraph::Stub> stub_;
};

// The ranked candidates a pruned pass did not visit, by their flags.
uint32_t FlaggedPruned(const kg::v1::RankResponse& ranking) {
  uint32_t flagged = 0;
  for (const kg::v1::RankedEntity& e : ranking.ranked()) flagged += e.pruned();
  return flagged;
}

kg::v1::RankOptions Budget(uint32_t nodes, uint32_t edges = 0, bool filter = false) {
  kg::v1::RankOptions options;
  options.set_max_visited_nodes(nodes);
  options.set_max_visited_edges(edges);
  options.set_filter_known_facts(filter);
  return options;
}

// With --pruning=false a neighbourhood past --max-subgraph-nodes is refused naming the flag;
// the search stops at the limit rather than covering the neighbourhood first. A call budget
// is refused there too.
TEST(PathServingLimitsTest, WithoutPruningANeighbourhoodOverTheNodeLimitIsRefusedNamingTheFlag) {
  LimitedPathServer server({"--max-subgraph-nodes=5", "--pruning=false"});
  ASSERT_TRUE(server.started());
  kg::v1::RankResponse response;
  grpc::Status status = server.RankTails("c20", "r2", {}, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("more than 5 nodes"));
  EXPECT_THAT(status.error_message(), HasSubstr("--max-subgraph-nodes=5"));
  status = server.RankTails("c20", "r2", Budget(4), &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("--pruning=false"));
  // The server keeps serving.
  grpc::ClientContext stats_context;
  kg::v1::GetStatsResponse stats;
  EXPECT_TRUE(server.stub().GetStats(&stats_context, kg::v1::GetStatsRequest(), &stats).ok());
}

// Past --max-subgraph-nodes (3; the ring's 3-hop balls hold 13 entities) a ranking and a
// score are pruned to it instead of refused, and say so: the ranking visits at most 2
// entities besides the fixed one, every other candidate sharing the far score; the metrics
// count both answers.
TEST(PathServingLimitsTest, ANeighbourhoodOverTheLimitIsPrunedToItAndSaysSo) {
  LimitedPathServer server({"--max-subgraph-nodes=3"});
  ASSERT_TRUE(server.started());
  EXPECT_EQ(server.Metric("grail_pruned_answers_total"), 0);
  kg::v1::RankResponse ranking;
  ASSERT_TRUE(server.RankTails("c20", "r2", {}, &ranking).ok());
  EXPECT_EQ(ranking.candidates_scored(), 59u);
  EXPECT_EQ(ranking.ranked_size(), 59);
  EXPECT_GE(ranking.candidates_pruned(), 59u - 2u);  // 2 visited
  // The far ones, and the known answer if the pass left it unvisited: each flagged.
  EXPECT_GE(ranking.candidates_pruned(), ranking.candidates_shared_score());
  EXPECT_LE(ranking.candidates_pruned(), ranking.candidates_shared_score() + 1);
  EXPECT_EQ(ranking.candidates_pruned(), FlaggedPruned(ranking));
  kg::v1::ScoreTripletResponse score;
  ASSERT_TRUE(server.Score({"c20", "r2", "c21"}, &score).ok());
  EXPECT_TRUE(score.pruned());
  EXPECT_LE(score.subgraph_nodes(), 3u);
  EXPECT_TRUE(score.known_fact());
  EXPECT_EQ(server.Metric("grail_pruned_answers_total"), 2);
}

// A call may ask for a smaller budget than the server's, never a larger one; a budget the
// neighbourhood fits ranks exactly as none does. A known answer the pruned pass did not
// visit is still filtered, or marked known with the far score.
TEST(PathServingLimitsTest, ACallBudgetPrunesBelowTheServersAndOneAboveItIsRefused) {
  LimitedPathServer server({});
  ASSERT_TRUE(server.started());
  kg::v1::RankResponse exact, fits, above, pruned, filtered;
  ASSERT_TRUE(server.RankTails("c20", "r2", {}, &exact).ok());
  EXPECT_EQ(exact.candidates_pruned(), 0u);
  const grpc::Status refused = server.RankTails("c20", "r2", Budget(65537), &above);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("--max-subgraph-nodes"));
  EXPECT_EQ(server.RankTails("c20", "r2", Budget(0, 1 << 30), &above).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  ASSERT_TRUE(server.RankTails("c20", "r2", Budget(13, 1000), &fits).ok());
  EXPECT_EQ(fits.candidates_pruned(), 0u);
  ASSERT_EQ(fits.ranked_size(), exact.ranked_size());
  for (int i = 0; i < exact.ranked_size(); ++i) {
    EXPECT_EQ(fits.ranked(i).entity(), exact.ranked(i).entity());
    ExpectClose(fits.ranked(i).score(), exact.ranked(i).score(), exact.ranked(i).entity());
  }

  // Two nodes: c20 and the first of its four neighbours, c18; its known answer c21 is left out.
  ASSERT_TRUE(server.RankTails("c20", "r2", Budget(2), &pruned).ok());
  EXPECT_GE(pruned.candidates_pruned(), 59u - 2u);
  float far = std::nanf("");
  const kg::v1::RankedEntity* c21 = nullptr;
  for (const kg::v1::RankedEntity& e : pruned.ranked()) {
    if (e.entity() == "c40") far = e.score();
    if (e.entity() == "c21") c21 = &e;
  }
  ASSERT_NE(c21, nullptr);
  EXPECT_TRUE(c21->known_fact());
  EXPECT_EQ(c21->score(), far);
  // Every candidate with the far score, the known answer c21 included, says it was not
  // visited; the one visited does not.
  for (const kg::v1::RankedEntity& e : pruned.ranked()) {
    EXPECT_EQ(e.pruned(), e.entity() != "c18") << e.entity();
  }
  EXPECT_EQ(pruned.candidates_pruned(), 58u);
  EXPECT_EQ(FlaggedPruned(pruned), 58u);

  // An explicit list on the same budget: the candidates the pass did not visit are counted
  // and flagged as pruned, not labelled exact (their far score is not their own).
  kg::v1::RankOptions listed = Budget(2);
  for (const char* c : {"c18", "c21", "c40"}) listed.add_candidates(c);
  kg::v1::RankResponse explicit_pruned;
  ASSERT_TRUE(server.RankTails("c20", "r2", listed, &explicit_pruned).ok());
  EXPECT_EQ(explicit_pruned.candidates_pruned(), 2u);
  ASSERT_EQ(explicit_pruned.ranked_size(), 3);
  for (const kg::v1::RankedEntity& e : explicit_pruned.ranked()) {
    EXPECT_EQ(e.pruned(), e.entity() != "c18") << e.entity();
  }
  listed.set_max_visited_nodes(0);  // the server's budget, which the ball fits: exact
  kg::v1::RankResponse explicit_exact;
  ASSERT_TRUE(server.RankTails("c20", "r2", listed, &explicit_exact).ok());
  EXPECT_EQ(explicit_exact.candidates_pruned(), 0u);
  for (const kg::v1::RankedEntity& e : explicit_exact.ranked()) EXPECT_FALSE(e.pruned());

  ASSERT_TRUE(server.RankTails("c20", "r2", Budget(2, 0, /*filter=*/true), &filtered).ok());
  EXPECT_EQ(filtered.candidates_filtered(), 1u);
  EXPECT_EQ(filtered.candidates_scored(), 58u);
  for (const kg::v1::RankedEntity& e : filtered.ranked()) EXPECT_NE(e.entity(), "c21");
}

// --score-max-subgraph-nodes prunes a score's pass below the server's budget, which rankings
// keep: the ranking over the 13-entity ball is exact, while a score comes from a pass over 2
// entities and says so. That pass takes the fact's tail first: c21, which a ranking at that
// budget leaves out with the far score, is scored on a pass that reaches it; c40, beyond any
// 2-entity pass, gets the far score as in that ranking.
TEST(PathServingLimitsTest, AScoreBudgetPrunesScoresAndLeavesRankingsTheServers) {
  LimitedPathServer server({"--score-max-subgraph-nodes=2"});
  ASSERT_TRUE(server.started());
  kg::v1::RankResponse exact, at_score_budget;
  ASSERT_TRUE(server.RankTails("c20", "r2", {}, &exact).ok());
  EXPECT_EQ(exact.candidates_pruned(), 0u);
  ASSERT_TRUE(server.RankTails("c20", "r2", Budget(2), &at_score_budget).ok());
  std::map<std::string, float> ranked;
  for (const kg::v1::RankedEntity& e : at_score_budget.ranked()) ranked[e.entity()] = e.score();
  std::map<std::string, float> scores;
  for (const char* tail : {"c21", "c40"}) {
    kg::v1::ScoreTripletResponse score;
    ASSERT_TRUE(server.Score({"c20", "r2", tail}, &score).ok());
    EXPECT_TRUE(score.pruned()) << tail;
    EXPECT_LE(score.subgraph_nodes(), 2u) << tail;
    scores[tail] = score.score();
  }
  ExpectClose(scores["c40"], ranked["c40"], "c40");
  EXPECT_EQ(ranked["c21"], ranked["c40"]);  // left out of the ranking's pass
  EXPECT_NE(scores["c21"], scores["c40"]);  // reached by the score's
}

// A model with a learned priority (A*Net's) served: the server's budget is what it
// materialises, and a call's budget below it is the entities each layer propagates from,
// chosen by the priority. A budget the 13-entity ball fits ranks exactly as none does; one of
// 2 entities a layer reaches at most 1 + 3 layers' edges, says so, and gives every entity it
// did not reach the far score, a known answer among them included; one above the server's is
// refused as any call's is.
TEST(PathServingLimitsTest, WithALearnedPriorityACallBudgetPrunesEachLayerWithinTheServers) {
  LimitedPathServer server({}, /*priority=*/true);
  ASSERT_TRUE(server.started());
  kg::v1::RankResponse exact, fits, pruned, above;
  ASSERT_TRUE(server.RankTails("c20", "r2", {}, &exact).ok());
  EXPECT_EQ(exact.candidates_pruned(), 0u);
  ASSERT_TRUE(server.RankTails("c20", "r2", Budget(13), &fits).ok());
  EXPECT_EQ(fits.candidates_pruned(), 0u);
  ASSERT_EQ(fits.ranked_size(), exact.ranked_size());
  for (int i = 0; i < exact.ranked_size(); ++i) {
    EXPECT_EQ(fits.ranked(i).entity(), exact.ranked(i).entity());
    ExpectClose(fits.ranked(i).score(), exact.ranked(i).score(), exact.ranked(i).entity());
  }
  EXPECT_EQ(server.RankTails("c20", "r2", Budget(65537), &above).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  ASSERT_TRUE(server.RankTails("c20", "r2", Budget(1), &pruned).ok());
  EXPECT_EQ(pruned.candidates_scored(), 59u);
  // One entity a layer: each of the 3 layers passes messages along at most the degree ratio
  // (1) times the ball's mean degree (46 message edges over 13 entities: 3) of edges, so at
  // most 9 of the ball's 12 other entities are reached, and the rest are pruned with the 47
  // beyond it (the known answer c21 among them if left unreached: flagged, as every one is).
  EXPECT_GE(pruned.candidates_pruned(), 59u - 9u);
  EXPECT_GT(pruned.candidates_pruned(), 59u - 12u);
  EXPECT_GE(pruned.candidates_pruned(), pruned.candidates_shared_score());
  EXPECT_EQ(pruned.candidates_pruned(), FlaggedPruned(pruned));
  kg::v1::ScoreTripletResponse score;
  ASSERT_TRUE(server.Score({"c20", "r2", "c40"}, &score).ok());
  float far = std::nanf("");
  for (const kg::v1::RankedEntity& e : pruned.ranked()) {
    if (e.entity() == "c40") far = e.score();
  }
  ExpectClose(far, score.score(), "c40");  // beyond the ball: the far score either way
}

}  // namespace
}  // namespace grail
