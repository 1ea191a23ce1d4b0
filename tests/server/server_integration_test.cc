// grail-server end to end: the real binary on a loopback port, a real RocksDB directory,
// real gRPC clients. Scores are checked against the offline scorer (model/fact_scoring)
// run in this process on the same facts with the same model file.
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "client/channel.h"
#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "model/grail/fact_scoring.h"
#include "model/grail/grail_model.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/reflection_call.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using kg::v1::KnowledgeGraph;
using ::testing::HasSubstr;

const std::vector<std::string> kRelations = {"r0", "r1", "r2", "r3"};

// A random graph over `entities` entities named e0.. and the four relations.
std::vector<NamedTriple> RandomGraph(int entities, int facts, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> entity(0, entities - 1), relation(0, 3);
  std::vector<NamedTriple> out;
  while (static_cast<int>(out.size()) < facts) {
    const int h = entity(random), t = entity(random);
    if (h == t) continue;
    out.push_back({absl::StrCat("e", h), kRelations[relation(random)], absl::StrCat("e", t)});
  }
  return out;
}

// Batched matrix products round differently for different batch shapes, so the same fact
// scored in another batch may differ in the last bits of a float; nothing more.
::testing::AssertionResult SameScore(float actual, float expected) {
  if (std::fabs(actual - expected) <= 1e-5f * std::max(1.0f, std::fabs(expected))) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << actual << " vs " << expected;
}

// The health service's answer for the whole server: 1 SERVING, 2 NOT_SERVING, -1 error.
int HealthStatus(const std::shared_ptr<grpc::Channel>& channel) {
  absl::StatusOr<int> health = CheckHealth(channel, std::chrono::seconds(10));
  return health.ok() ? *health : -1;
}

// The raw bytes of server reflection's list of services.
std::string ReflectionListing(const std::shared_ptr<grpc::Channel>& channel) {
  return ListServicesByReflection(channel,
                                  std::chrono::system_clock::now() + std::chrono::seconds(10))
      .bytes;
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir();
    absl::StatusOr<std::unique_ptr<GrailModel>> model =
        GrailModel::Create(TwoHopConfig(), kRelations, /*seed=*/11);
    ASSERT_TRUE(model.ok()) << model.status();
    model_path_ = new std::string(dir_->Sub("model.pt"));
    ASSERT_TRUE((*model)->Save(*model_path_).ok());
    model_ = model->release();
    graph_ = new std::vector<NamedTriple>(RandomGraph(60, 240, 5));
    server_ = new ServerProcess();
    ASSERT_TRUE(server_->Start({"--model=" + *model_path_, "--data-dir=" + dir_->Sub("store"),
                                "--max-request-triples=20000", "--max-batch-size=64"},
                               dir_->Sub("server.log")));
    auto stub = KnowledgeGraph::NewStub(
        grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials()));
    // The graph goes in through the API, in chunks of 50.
    std::vector<std::vector<NamedTriple>> chunks;
    for (size_t i = 0; i < graph_->size(); i += 50) {
      chunks.emplace_back(graph_->begin() + i, graph_->begin() + std::min(graph_->size(), i + 50));
    }
    const AddOutcome added = AddChunks(*stub, chunks);
    ASSERT_TRUE(added.status.ok()) << added.status.error_message();
    ASSERT_EQ(added.acks.size(), chunks.size());
  }
  static void TearDownTestSuite() {
    delete server_;
    delete model_;
    delete graph_;
    delete model_path_;
    delete dir_;
  }

  void SetUp() override {
    ASSERT_NE(server_, nullptr);
    channel_ = grpc::CreateChannel(server_->target(), grpc::InsecureChannelCredentials());
    stub_ = KnowledgeGraph::NewStub(channel_);
  }

  // What the offline scorer gives each of `facts` on `graph` (names resolved there).
  static std::vector<float> OfflineScores(const std::vector<NamedTriple>& graph,
                                          const std::vector<NamedTriple>& facts) {
    std::vector<NamedTriple> all = graph;
    all.insert(all.end(), facts.begin(), facts.end());
    IndexedTriples indexed;
    IndexTriples(all, &indexed);
    const std::vector<Triple> graph_ids(indexed.triples.begin(),
                                        indexed.triples.begin() + graph.size());
    const StaticGraph static_graph(indexed.entities.size(), graph_ids);
    const std::vector<Triple> fact_ids(indexed.triples.begin() + graph.size(),
                                       indexed.triples.end());
    absl::StatusOr<std::vector<float>> scores = ScoreGrailFacts(
        *model_, static_graph, MapRelationsByName(indexed.relations.names(), kRelations), fact_ids,
        GrailScoringOptions{/*batch_size=*/7, /*threads=*/1});
    EXPECT_TRUE(scores.ok()) << scores.status();
    return scores.ok() ? *scores : std::vector<float>();
  }

  grpc::Status Score(const NamedTriple& t, kg::v1::ScoreTripletResponse* response) {
    grpc::ClientContext context;
    kg::v1::ScoreTripletRequest request;
    *request.mutable_triple() = ToProto(t);
    return stub_->ScoreTriplet(&context, request, response);
  }
  float ScoreOrDie(const NamedTriple& t) {
    kg::v1::ScoreTripletResponse response;
    const grpc::Status status = Score(t, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.score();
  }

  static ScopedTempDir* dir_;
  static std::string* model_path_;
  static GrailModel* model_;
  static std::vector<NamedTriple>* graph_;
  static ServerProcess* server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<KnowledgeGraph::Stub> stub_;
};
ScopedTempDir* ServerTest::dir_ = nullptr;
std::string* ServerTest::model_path_ = nullptr;
GrailModel* ServerTest::model_ = nullptr;
std::vector<NamedTriple>* ServerTest::graph_ = nullptr;
ServerProcess* ServerTest::server_ = nullptr;

TEST(ServerFlagsTest, OutOfRangeFlagsAreUsageErrorsNamingTheFlagAndItsRange) {
  const struct {
    std::string flag;
    std::string range;
  } cases[] = {
      {"--max-request-triples=-1", "1..10000000"},   {"--max-chunk-facts=-1", "1..100000000"},
      {"--max-name-bytes=-1", "1..1048576"},         {"--port=70000", "0..65535"},
      {"--max-message-bytes=0", "4096..2147483647"}, {"--extraction-threads=100000", "0..1024"},
      {"--compute-threads=20000", "0..1024"},        {"--metrics-port=-2", "-1..65535"},
  };
  for (const auto& c : cases) {
    // The range check comes first: no model or store is needed to be told.
    const BinaryRun run = RunBinary("grail-server", c.flag);
    EXPECT_EQ(run.exit_code, 2) << c.flag << ": " << run.all();
    EXPECT_THAT(run.err, HasSubstr(c.flag + " is out of range: it takes " + c.range)) << c.flag;
  }
  // In range, the next complaint is the missing model: the check lets it through.
  const BinaryRun fine = RunBinary("grail-server", "--port=65535 --max-message-bytes=4096");
  EXPECT_EQ(fine.exit_code, 2);
  EXPECT_THAT(fine.err, HasSubstr("--model and --data-dir are required"));
}

// A score's budget is at most the server's, and prunes only where pruning is on: each
// contradiction is a usage error naming the flags, before anything is loaded.
TEST(ServerFlagsTest, AScoreBudgetAboveTheServersOrWithoutPruningIsAUsageError) {
  const std::string base = "--model=absent.pt --data-dir=absent ";
  const BinaryRun above =
      RunBinary("grail-server", base + "--max-subgraph-nodes=100 --score-max-subgraph-nodes=101");
  EXPECT_EQ(above.exit_code, 2) << above.all();
  EXPECT_THAT(above.err, HasSubstr("--score-max-subgraph-nodes=101"));
  EXPECT_THAT(above.err, HasSubstr("a score's budget is at most the server's"));
  const BinaryRun edges = RunBinary("grail-server", base + "--score-max-subgraph-edges=300000");
  EXPECT_EQ(edges.exit_code, 2) << edges.all();
  EXPECT_THAT(edges.err, HasSubstr("-edges=300000 are above"));
  const BinaryRun unpruned =
      RunBinary("grail-server", base + "--pruning=false --score-max-subgraph-nodes=10");
  EXPECT_EQ(unpruned.exit_code, 2) << unpruned.all();
  EXPECT_THAT(unpruned.err, HasSubstr("--pruning=false"));
}

// One command-line contract for every binary (common/command_line.h): usage errors exit 2,
// --help and -h exit 0 listing the binary's own flags, dashes and underscores both work.
TEST(CommandLineTest, EveryBinaryExitsTwoOnUsageErrorsAndZeroOnHelp) {
  const struct {
    std::string binary;
    std::string flag;  // one of its own flags, as --help lists it
  } binaries[] = {{"grail-server", "--metrics_port"},
                  {"grail-client", "--deadline_ms"},
                  {"grail-train", "--epochs"},
                  {"grail-eval", "--seed"},
                  {"grail-tools", "--max_nodes_per_hop"}};
  for (const auto& b : binaries) {
    const BinaryRun unknown = RunBinary(b.binary, "--no-such-flag=1");
    EXPECT_EQ(unknown.exit_code, 2) << b.binary << ": " << unknown.all();
    EXPECT_THAT(unknown.err, HasSubstr("Unknown command line flag 'no_such_flag'")) << b.binary;
    const std::string dashed =
        b.flag.substr(0, 2) + absl::StrReplaceAll(b.flag.substr(2), {{"_", "-"}});
    const BinaryRun bad_value = RunBinary(b.binary, dashed + "=not-a-value");
    EXPECT_EQ(bad_value.exit_code, 2) << b.binary << ": " << bad_value.all();
    EXPECT_THAT(bad_value.err, HasSubstr("Illegal value 'not-a-value'")) << b.binary;
    for (const char* help : {"--help", "-h"}) {
      const BinaryRun run = RunBinary(b.binary, help);
      EXPECT_EQ(run.exit_code, 0) << b.binary << " " << help << ": " << run.all();
      EXPECT_THAT(run.out, HasSubstr(b.flag)) << b.binary << " " << help;
    }
  }
}

TEST_F(ServerTest, HealthIsServingAndReflectionListsTheService) {
  EXPECT_EQ(HealthStatus(channel_), 1);
  EXPECT_THAT(ReflectionListing(channel_), HasSubstr("kg.v1.KnowledgeGraph"));
}

TEST_F(ServerTest, StatsCountWhatWasAdded) {
  grpc::ClientContext context;
  kg::v1::GetStatsResponse stats;
  ASSERT_TRUE(stub_->GetStats(&context, kg::v1::GetStatsRequest(), &stats).ok());
  IndexedTriples indexed;
  IndexTriples(*graph_, &indexed);
  const StaticGraph expected(indexed.entities.size(), indexed.triples);
  EXPECT_EQ(stats.entities(), expected.num_entities());
  EXPECT_EQ(stats.relations(), expected.num_relations());
  EXPECT_EQ(stats.facts(), expected.num_facts());
  EXPECT_EQ(stats.graph_sequence(), 5u);  // 240 facts in chunks of 50
  EXPECT_THAT(
      std::vector<std::string>(stats.model().relations().begin(), stats.model().relations().end()),
      ::testing::ElementsAreArray(kRelations));
  EXPECT_EQ(stats.model().hops(), 2u);
  EXPECT_EQ(stats.model().format(), kGrailModelFormat);
  EXPECT_EQ(stats.model().parameters(), static_cast<uint64_t>(model_->num_parameters()));
  EXPECT_EQ(stats.max_batch_size(), 64u);
}

TEST_F(ServerTest, ScoresEqualTheOfflineScorer) {
  // Facts of the graph, new pairs, and a relation the graph never used with a pair.
  std::vector<NamedTriple> facts(graph_->begin(), graph_->begin() + 20);
  for (int i = 0; i < 20; ++i) {
    facts.push_back({absl::StrCat("e", i), kRelations[i % 4], absl::StrCat("e", 59 - i)});
  }
  const std::vector<float> expected = OfflineScores(*graph_, facts);
  ASSERT_EQ(expected.size(), facts.size());
  for (size_t i = 0; i < facts.size(); ++i) {
    kg::v1::ScoreTripletResponse response;
    ASSERT_TRUE(Score(facts[i], &response).ok());
    EXPECT_TRUE(SameScore(response.score(), expected[i])) << "fact " << i;
    EXPECT_FLOAT_EQ(response.probability(), 1.0f / (1.0f + std::exp(-response.score())));
    EXPECT_GE(response.subgraph_nodes(), 2u);
    EXPECT_GE(response.subgraph_edges(), 1u);  // the target edge at least
    EXPECT_EQ(response.graph_sequence(), 5u);
    if (i < 20) {
      EXPECT_TRUE(response.known_fact()) << "fact " << i;
    }
  }
}

TEST_F(ServerTest, BatchScoresComeBackInOrderAndEqualSingleScores) {
  kg::v1::ScoreTripletsRequest request;
  std::vector<NamedTriple> facts;
  for (int i = 0; i < 150; ++i) {
    facts.push_back(
        {absl::StrCat("e", i % 60), kRelations[i % 4], absl::StrCat("e", (i * 7 + 1) % 60)});
    if (facts.back().head == facts.back().tail) facts.back().tail = "e59", facts.back().head = "e0";
    *request.add_triples() = ToProto(facts.back());
  }
  grpc::ClientContext context;
  kg::v1::ScoreTripletsResponse response;
  ASSERT_TRUE(stub_->ScoreTriplets(&context, request, &response).ok());
  ASSERT_EQ(response.results_size(), 150);
  for (int i = 0; i < 150; i += 13) {
    EXPECT_TRUE(SameScore(response.results(i).score(), ScoreOrDie(facts[i]))) << "fact " << i;
  }
}

TEST_F(ServerTest, RankTailsIsExactSortedAndHonoursTopK) {
  kg::v1::RankTailsRequest request;
  request.set_head("e3");
  request.set_relation("r1");
  for (int i = 0; i < 30; ++i) request.mutable_options()->add_candidates(absl::StrCat("e", i * 2));
  request.mutable_options()->add_candidates("e0");  // a duplicate: ranked once
  grpc::ClientContext context;
  kg::v1::RankResponse response;
  ASSERT_TRUE(stub_->RankTails(&context, request, &response).ok());
  EXPECT_EQ(response.candidates_scored(), 30u);  // e3 is odd: not among the candidates
  ASSERT_EQ(response.ranked_size(), 30);
  for (int i = 0; i < response.ranked_size(); ++i) {
    const kg::v1::RankedEntity& r = response.ranked(i);
    EXPECT_TRUE(SameScore(r.score(), ScoreOrDie({"e3", "r1", r.entity()}))) << r.entity();
    if (i > 0) {
      EXPECT_GE(response.ranked(i - 1).score(), r.score());
      EXPECT_EQ(r.rank(), r.score() == response.ranked(i - 1).score()
                              ? response.ranked(i - 1).rank()
                              : static_cast<uint32_t>(i + 1));
    } else {
      EXPECT_EQ(r.rank(), 1u);
    }
  }
  // top_k returns the head of the same list.
  request.mutable_options()->set_top_k(5);
  grpc::ClientContext top_context;
  kg::v1::RankResponse top;
  ASSERT_TRUE(stub_->RankTails(&top_context, request, &top).ok());
  ASSERT_EQ(top.ranked_size(), 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(top.ranked(i).entity(), response.ranked(i).entity());
}

TEST_F(ServerTest, RankHeadsOverEveryEntityFiltersKnownFacts) {
  // Pick a (relation, tail) with known heads.
  const NamedTriple& known = (*graph_)[0];
  int known_heads = 0;
  for (const NamedTriple& t : *graph_)
    known_heads += t.relation == known.relation && t.tail == known.tail;
  kg::v1::RankHeadsRequest request;
  request.set_relation(known.relation);
  request.set_tail(known.tail);
  grpc::ClientContext all_context;
  kg::v1::RankResponse all;
  ASSERT_TRUE(stub_->RankHeads(&all_context, request, &all).ok());
  EXPECT_EQ(all.ranked_size(), 59);  // every entity but the tail
  int known_flags = 0;
  for (const kg::v1::RankedEntity& r : all.ranked()) {
    known_flags += r.known_fact();
    EXPECT_NE(r.entity(), known.tail);
  }
  EXPECT_GE(known_flags, 1);

  request.mutable_options()->set_filter_known_facts(true);
  grpc::ClientContext filtered_context;
  kg::v1::RankResponse filtered;
  ASSERT_TRUE(stub_->RankHeads(&filtered_context, request, &filtered).ok());
  EXPECT_EQ(filtered.candidates_filtered(), static_cast<uint32_t>(known_flags));
  EXPECT_EQ(filtered.ranked_size(), 59 - known_flags);
  for (const kg::v1::RankedEntity& r : filtered.ranked()) {
    EXPECT_FALSE(r.known_fact()) << r.entity();
    EXPECT_NE(r.entity(), known.head);
    EXPECT_TRUE(SameScore(r.score(), ScoreOrDie({r.entity(), known.relation, known.tail})));
  }
}

// A hostile name: beyond --max-name-bytes (1024 here) a read call is INVALID_ARGUMENT saying
// so (before, the NOT_FOUND echoing a 20 KB name became RESOURCE_EXHAUSTED, "metadata size
// exceeds limit"); within it, error messages quote a prefix and the length.
TEST_F(ServerTest, LongNamesAreRefusedAndQuotedByAPrefix) {
  kg::v1::ScoreTripletResponse response;
  const std::string huge(20000, 'x');
  grpc::Status s = Score({huge, "r0", "e1"}, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message().size();
  EXPECT_THAT(s.error_message(), HasSubstr("triple.head is 20000 bytes; the limit is 1024"));
  EXPECT_LT(s.error_message().size(), 200u);

  const std::string long_name(1000, 'y');
  s = Score({"e1", "r0", long_name}, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("(1000 bytes) is not in the graph"));
  EXPECT_LT(s.error_message().size(), 200u);

  kg::v1::RankTailsRequest rank;
  rank.set_head("e1");
  rank.set_relation(huge);
  grpc::ClientContext context;
  kg::v1::RankResponse ranked;
  s = stub_->RankTails(&context, rank, &ranked);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("relation is 20000 bytes"));
}

TEST_F(ServerTest, ErrorsNameWhatIsWrong) {
  kg::v1::ScoreTripletResponse response;
  grpc::Status s = Score({"e1", "r0", "nobody"}, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("\"nobody\""));
  s = Score({"e1", "married_to", "e2"}, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("\"married_to\""));
  s = Score({"e1", "r0", "e1"}, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = Score({"e1", "", "e2"}, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("relation is empty"));
  // The store's rule for names holds on the read path too: such a name cannot be stored.
  s = Score({"e1", "r0", "e\t2"}, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("tail contains a TAB at byte 1"));

  kg::v1::RankTailsRequest rank;
  rank.set_head("e1");
  rank.set_relation("r0");
  rank.mutable_options()->add_candidates("e2");
  rank.mutable_options()->add_candidates("ghost");
  grpc::ClientContext rank_context;
  kg::v1::RankResponse ranked;
  s = stub_->RankTails(&rank_context, rank, &ranked);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(s.error_message(), HasSubstr("\"ghost\""));

  kg::v1::ScoreTripletsRequest batch;
  *batch.add_triples() = ToProto({"e1", "r0", "e2"});
  *batch.add_triples() = ToProto({"e1", "r0", ""});
  grpc::ClientContext batch_context;
  kg::v1::ScoreTripletsResponse batch_response;
  s = stub_->ScoreTriplets(&batch_context, batch, &batch_response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("triples[1].tail is empty"));
}

// grail_dropped_calls_total{reason="deadline"} as the server's /metrics says it now.
double DeadlineDrops(int metrics_port) {
  return ScrapedMetric(metrics_port, R"(grail_dropped_calls_total\{reason="deadline"\})");
}

TEST_F(ServerTest, DeadlineExceededStopsTheCallAndTheServerStaysHealthy) {
  const double drops_before = DeadlineDrops(server_->metrics_port());
  ASSERT_GE(drops_before, 0);
  kg::v1::ScoreTripletsRequest request;
  for (int i = 0; i < 20000; ++i) {
    *request.add_triples() = ToProto({absl::StrCat("e", i % 59), "r2", "e59"});
  }
  grpc::ClientContext context;
  // Long enough for the 600 kB request to reach the handler and the engine on a loaded
  // machine (an instrumented build; at 20 ms gRPC sometimes ended the call before any
  // handler saw it), far too short for 20 000 facts to be scored.
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(250));
  kg::v1::ScoreTripletsResponse response;
  const grpc::Status s = stub_->ScoreTriplets(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  // The client gives up at its deadline on its own; the server must see it too and stop the
  // call's work, which it counts (its engine finishes the call soon after: wait for it,
  // within a bound).
  double drops_after = drops_before;
  for (int i = 0; i < 300 && drops_after <= drops_before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    drops_after = DeadlineDrops(server_->metrics_port());
  }
  EXPECT_EQ(drops_after, drops_before + 1);
  EXPECT_EQ(HealthStatus(channel_), 1);
  kg::v1::ScoreTripletResponse single;
  EXPECT_TRUE(Score({"e1", "r0", "e2"}, &single).ok());
}

TEST_F(ServerTest, BadChunkIsRejectedWholeNamingItsLineAndEarlierChunksStay) {
  const std::vector<NamedTriple> good = {{"bc_a", "r0", "e1"}, {"bc_b", "r1", "e2"}};
  const std::vector<NamedTriple> bad = {
      {"bc_c", "r0", "e1"}, {"bc_d", "r1", "e2"}, {"bc_e", "r2", ""}};
  const AddOutcome outcome = AddChunks(*stub_, {good, bad}, /*first_line=*/101);
  ASSERT_EQ(outcome.acks.size(), 1u);
  EXPECT_EQ(outcome.acks[0].facts_added(), 2u);
  EXPECT_EQ(outcome.acks[0].entities_created(), 2u);
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("line 105"));  // 101, 102 | 103, 104, 105
  kg::v1::ScoreTripletResponse response;
  EXPECT_TRUE(Score({"bc_a", "r0", "e1"}, &response).ok());
  EXPECT_TRUE(response.known_fact());
  // Nothing of the bad chunk: its good first facts did not create their entities.
  EXPECT_EQ(Score({"bc_c", "r0", "e1"}, &response).error_code(), grpc::StatusCode::NOT_FOUND);

  // A relation outside the model's vocabulary is refused too (no --allow-unknown-relations).
  const AddOutcome unknown = AddChunks(*stub_, {{{"bc_f", "knows", "e1"}}});
  EXPECT_EQ(unknown.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unknown.status.error_message(), HasSubstr("line 1"));
  EXPECT_THAT(unknown.status.error_message(), HasSubstr("knows"));
}

TEST_F(ServerTest, AddedEntitiesAreScoredByTheNextRequest) {
  kg::v1::ScoreTripletResponse response;
  EXPECT_EQ(Score({"newcomer", "r3", "e4"}, &response).error_code(), grpc::StatusCode::NOT_FOUND);
  const AddOutcome added = AddChunks(
      *stub_, {{{"newcomer", "r3", "e4"}, {"newcomer", "r1", "e5"}, {"e6", "r0", "newcomer"}}});
  ASSERT_TRUE(added.status.ok()) << added.status.error_message();
  ASSERT_EQ(added.acks.size(), 1u);
  EXPECT_EQ(added.acks[0].entities_created(), 1u);
  ASSERT_TRUE(Score({"newcomer", "r3", "e4"}, &response).ok());
  EXPECT_TRUE(response.known_fact());
  EXPECT_GE(response.graph_sequence(), added.acks[0].sequence());
  // The new entity is a candidate of rankings over every entity at once.
  kg::v1::RankTailsRequest rank;
  rank.set_head("e6");
  rank.set_relation("r0");
  grpc::ClientContext context;
  kg::v1::RankResponse ranked;
  ASSERT_TRUE(stub_->RankTails(&context, rank, &ranked).ok());
  bool found = false;
  for (const kg::v1::RankedEntity& r : ranked.ranked()) found |= r.entity() == "newcomer";
  EXPECT_TRUE(found);
}

TEST_F(ServerTest, ConcurrentClientsGetTheSameScoresAsOneClient) {
  std::vector<NamedTriple> facts;
  for (int i = 0; i < 40; ++i) facts.push_back({absl::StrCat("e", i), kRelations[i % 4], "e50"});
  facts[0].head = "e1";
  std::vector<float> expected;
  for (const NamedTriple& f : facts) expected.push_back(ScoreOrDie(f));
  std::atomic<int> mismatches{0}, failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      auto stub = KnowledgeGraph::NewStub(channel_);
      for (int k = 0; k < 40; ++k) {
        const size_t i = (c * 7 + k) % facts.size();
        grpc::ClientContext context;
        kg::v1::ScoreTripletRequest request;
        *request.mutable_triple() = ToProto(facts[i]);
        kg::v1::ScoreTripletResponse response;
        if (!stub->ScoreTriplet(&context, request, &response).ok()) {
          ++failures;
        } else if (!SameScore(response.score(), expected[i])) {
          ++mismatches;
        }
      }
    });
  }
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(mismatches.load(), 0);
}

TEST_F(ServerTest, ReadersSeeGraphVersionsOnlyMoveForwardWhileAWriterAdds) {
  std::atomic<bool> writing{true};
  std::atomic<int> failures{0}, regressions{0};
  std::vector<std::thread> readers;
  for (int c = 0; c < 4; ++c) {
    readers.emplace_back([&] {
      auto stub = KnowledgeGraph::NewStub(channel_);
      uint64_t last = 0;
      while (writing.load()) {
        grpc::ClientContext context;
        kg::v1::ScoreTripletRequest request;
        *request.mutable_triple() = ToProto({"e7", "r2", "e8"});
        kg::v1::ScoreTripletResponse response;
        if (!stub->ScoreTriplet(&context, request, &response).ok()) {
          ++failures;
          continue;
        }
        regressions += response.graph_sequence() < last;
        last = response.graph_sequence();
      }
    });
  }
  std::vector<std::vector<NamedTriple>> chunks;
  for (int k = 0; k < 20; ++k) chunks.push_back({{absl::StrCat("w", k), "r2", "e8"}});
  const AddOutcome added = AddChunks(*stub_, chunks);
  writing = false;
  for (std::thread& t : readers) t.join();
  ASSERT_TRUE(added.status.ok());
  ASSERT_EQ(added.acks.size(), 20u);
  for (size_t k = 1; k < added.acks.size(); ++k) {
    EXPECT_EQ(added.acks[k].sequence(), added.acks[k - 1].sequence() + 1);
    EXPECT_EQ(added.acks[k].chunk_index(), k);
  }
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(regressions.load(), 0);
}

// The real grail-client binary against the real server.
TEST_F(ServerTest, ClientBinaryScoresAddsAndReportsRejectedLines) {
  const std::string target = "--target " + server_->target();
  const BinaryRun score = RunBinary("grail-client", target + " score e1 r2 e7");
  ASSERT_EQ(score.exit_code, 0) << score.err;
  EXPECT_TRUE(SameScore(std::stof(score.out), ScoreOrDie({"e1", "r2", "e7"}))) << score.out;

  const BinaryRun missing = RunBinary("grail-client", target + " score e1 r2 nobody");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("NOT_FOUND"));

  // A file whose third chunk (lines 5-6, chunk size 2) has, on line 6, a relation the model
  // does not know.
  const std::string file = dir_->Sub("client_add.tsv");
  std::ofstream(file) << "cl_a\tr0\te1\ncl_b\tr1\te2\ncl_c\tr2\te3\ncl_d\tr3\te4\n"
                      << "cl_e\tr0\te5\ncl_f\tmarried_to\te6\n";
  BinaryRun add = RunBinary("grail-client", target + " add " + file + " --chunk 2");
  EXPECT_EQ(add.exit_code, 1) << add.all();
  EXPECT_THAT(add.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(add.err, HasSubstr("line 6"));
  kg::v1::ScoreTripletResponse response;
  EXPECT_TRUE(Score({"cl_d", "r3", "e4"}, &response).ok());  // chunk 2 was stored
  EXPECT_EQ(Score({"cl_e", "r0", "e5"}, &response).error_code(), grpc::StatusCode::NOT_FOUND);

  const BinaryRun stats = RunBinary("grail-client", target + " stats");
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_THAT(stats.out, HasSubstr("\"relations\":4"));
  EXPECT_THAT(stats.out, HasSubstr("\"format\":\"grail-kg-model/1\""));
}

// Scheduling on the real server: a graph on which a ranking over every entity is a large
// call (every entity is within k + 1 hops of every other, so each candidate gets its own
// subgraph), plus isolated pairs far from everything, which share one score.
class ServerSchedulingTest : public ::testing::Test {
 protected:
  static constexpr int kDenseEntities = 1500;
  static constexpr int kIsolatedPairs = 200;

  static void SetUpTestSuite() {
    dir_ = new ScopedTempDir();
    ASSERT_TRUE(
        SaveUntrainedModel(dir_->Sub("model.pt"), kRelations, /*seed=*/17, TwoHopConfig()).ok());
    graph_ = new std::vector<NamedTriple>(RandomGraph(kDenseEntities, 9000, 23));
    for (int i = 0; i < kIsolatedPairs; ++i) {
      graph_->push_back({absl::StrCat("far", 2 * i), "r0", absl::StrCat("far", 2 * i + 1)});
    }
  }
  static void TearDownTestSuite() {
    delete graph_;
    delete dir_;
  }

  // Starts a server with `flags` on a fresh store and loads the graph.
  void StartServer(std::vector<std::string> flags) {
    flags.push_back("--model=" + dir_->Sub("model.pt"));
    flags.push_back("--data-dir=" + store_.Sub("store"));
    ASSERT_TRUE(server_.Start(flags, store_.Sub("server.log")));
    channel_ = grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials());
    stub_ = KnowledgeGraph::NewStub(channel_);
    std::vector<std::vector<NamedTriple>> chunks;
    for (size_t i = 0; i < graph_->size(); i += 2000) {
      chunks.emplace_back(graph_->begin() + i,
                          graph_->begin() + std::min(graph_->size(), i + 2000));
    }
    const AddOutcome added = AddChunks(*stub_, chunks);
    ASSERT_TRUE(added.status.ok()) << added.status.error_message();
  }

  // The value of the first series of /metrics matching `series` (a regex), or -1.
  double Metric(const std::string& series) { return ScrapedMetric(server_.metrics_port(), series); }
  // Scores `fact` `calls` times through `stub`, each call sent once the last one answered;
  // returns how many failed, the last failure's message in `*error`.
  static int FailedScoresInSequence(KnowledgeGraph::Stub& stub, const NamedTriple& fact, int calls,
                                    std::string* error) {
    int failed = 0;
    for (int i = 0; i < calls; ++i) {
      grpc::ClientContext context;
      kg::v1::ScoreTripletRequest request;
      *request.mutable_triple() = ToProto(fact);
      kg::v1::ScoreTripletResponse score;
      const grpc::Status status = stub.ScoreTriplet(&context, request, &score);
      if (!status.ok()) {
        ++failed;
        *error = status.error_message();
      }
    }
    return failed;
  }

  static kg::v1::RankTailsRequest RankEveryTail(const std::string& head) {
    kg::v1::RankTailsRequest request;
    request.set_head(head);
    request.set_relation("r1");
    request.mutable_options()->set_top_k(10);
    return request;
  }

  static ScopedTempDir* dir_;
  static std::vector<NamedTriple>* graph_;
  ScopedTempDir store_;
  ServerProcess server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<KnowledgeGraph::Stub> stub_;
};
ScopedTempDir* ServerSchedulingTest::dir_ = nullptr;
std::vector<NamedTriple>* ServerSchedulingTest::graph_ = nullptr;

TEST_F(ServerSchedulingTest, AScoreSentWhileALargeRankingRunsCompletesBeforeIt) {
  // Small forwards make the ranking many forwards long.
  ASSERT_NO_FATAL_FAILURE(StartServer({"--max-batch-size=4", "--max-queue-delay-us=0"}));
  for (int attempt = 0; attempt < 5; ++attempt) {
    std::atomic<int> finished{0};
    int ranking_order = -1, score_order = -1;
    grpc::Status ranking_status;
    kg::v1::RankResponse ranking;
    const double extracted_before = Metric("grail_subgraph_nodes_count");
    std::thread ranker([&] {
      grpc::ClientContext context;
      ranking_status = stub_->RankTails(&context, RankEveryTail("e1"), &ranking);
      ranking_order = finished++;
    });
    // Once the server is extracting the ranking's subgraphs, it has certainly received it.
    while (finished.load() == 0 && Metric("grail_subgraph_nodes_count") < extracted_before + 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const bool ranking_in_progress = finished.load() == 0;
    kg::v1::ScoreTripletResponse score;
    grpc::ClientContext context;
    kg::v1::ScoreTripletRequest request;
    *request.mutable_triple() = ToProto({"e2", "r0", "e3"});
    const grpc::Status score_status = stub_->ScoreTriplet(&context, request, &score);
    score_order = finished++;
    ranker.join();
    ASSERT_TRUE(score_status.ok()) << score_status.error_message();
    ASSERT_TRUE(ranking_status.ok()) << ranking_status.error_message();
    EXPECT_GT(ranking.candidates_scored(), static_cast<uint32_t>(kDenseEntities));
    if (!ranking_in_progress) continue;  // this machine ranked too fast to tell; again
    EXPECT_LT(score_order, ranking_order);
    return;
  }
  FAIL() << "the ranking always finished before the score was sent";
}

TEST_F(ServerSchedulingTest, RankingEveryTailSharesOneScoreAmongFarCandidates) {
  ASSERT_NO_FATAL_FAILURE(StartServer({}));
  grpc::ClientContext context;
  kg::v1::RankTailsRequest request = RankEveryTail("far0");
  request.mutable_options()->set_top_k(0);
  kg::v1::RankResponse response;
  ASSERT_TRUE(stub_->RankTails(&context, request, &response).ok());
  // far0's only neighbour is far1: every other entity is far.
  const uint32_t entities = kDenseEntities + 2 * kIsolatedPairs;
  EXPECT_EQ(response.candidates_scored(), entities - 1);
  EXPECT_EQ(response.candidates_shared_score(), entities - 2);
  ASSERT_EQ(response.ranked_size(), static_cast<int>(entities - 1));
  // Each far candidate's score is what ScoreTriplet says for it.
  for (const std::string tail : {"e7", "far5", "e1400"}) {
    const auto it = std::find_if(response.ranked().begin(), response.ranked().end(),
                                 [&](const kg::v1::RankedEntity& r) { return r.entity() == tail; });
    ASSERT_NE(it, response.ranked().end()) << tail;
    grpc::ClientContext score_context;
    kg::v1::ScoreTripletRequest score_request;
    *score_request.mutable_triple() = ToProto({"far0", "r1", tail});
    kg::v1::ScoreTripletResponse score;
    ASSERT_TRUE(stub_->ScoreTriplet(&score_context, score_request, &score).ok());
    EXPECT_TRUE(SameScore(it->score(), score.score())) << tail;
    EXPECT_EQ(score.subgraph_nodes(), 2u);
  }
}

// A client flooding the server with the largest rankings the API allows, from many threads
// on one connection, holds at most its share of the calls in flight and of admitted work: a
// second client's calls are all admitted and answered (before per-caller shares, 212 of 212
// of them were refused), and the flood's own excess is told to wait for its earlier calls.
TEST_F(ServerSchedulingTest, OneCallerFloodingCannotLockOutAnother) {
  ASSERT_NO_FATAL_FAILURE(StartServer({"--max-calls-in-flight=8", "--max-batch-size=4"}));
  std::atomic<bool> stop{false};
  std::atomic<int> flood_answered{0}, flood_refused{0}, flood_other{0};
  std::mutex mu;
  std::string share_message;
  std::vector<std::thread> flood;
  for (int t = 0; t < 12; ++t) {
    flood.emplace_back([&] {
      while (!stop.load()) {
        grpc::ClientContext context;
        kg::v1::RankTailsRequest request = RankEveryTail("e1");
        request.mutable_options()->set_top_k(67108000);
        kg::v1::RankResponse ranking;
        const grpc::Status status = stub_->RankTails(&context, request, &ranking);
        if (status.ok()) {
          ++flood_answered;
        } else if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
          ++flood_refused;
          std::lock_guard<std::mutex> lock(mu);
          share_message = status.error_message();
        } else {
          ++flood_other;
        }
      }
    });
  }
  // Another connection (its own subchannel): another caller.
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto victim = KnowledgeGraph::NewStub(
      grpc::CreateCustomChannel(server_.target(), grpc::InsecureChannelCredentials(), arguments));
  while (flood_refused.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  std::string victim_error;
  const int victim_failed = FailedScoresInSequence(*victim, {"e2", "r0", "e3"}, 40, &victim_error);
  stop.store(true);
  for (std::thread& t : flood) t.join();
  EXPECT_EQ(victim_failed, 0) << victim_error;
  EXPECT_GT(flood_answered.load(), 0);
  EXPECT_EQ(flood_other.load(), 0);
  EXPECT_THAT(share_message, HasSubstr("--max-caller-share"));
  EXPECT_THAT(share_message, HasSubstr("retry when its earlier calls have finished"));
  EXPECT_GE(Metric("grail_rejected_calls_total\\{limit=\"max_caller_share\"\\}"), 1);
}

// A caller's slot is free once its answer arrives: with a share of one call, a client that
// waits for each answer before asking again is never refused, even when the answers come
// back faster than gRPC reports the earlier calls done (as the pass cache's do: 14 of 40 such
// calls were refused under load while the slot was held until then).
TEST_F(ServerSchedulingTest, AClientThatWaitsForEachAnswerIsNeverRefusedItsShare) {
  ASSERT_NO_FATAL_FAILURE(StartServer({"--max-calls-in-flight=4", "--max-caller-share=0.25"}));
  std::string error;
  EXPECT_EQ(FailedScoresInSequence(*stub_, {"e2", "r0", "e3"}, 300, &error), 0) << error;
  EXPECT_LE(Metric("grail_rejected_calls_total\\{limit=\"max_caller_share\"\\}"), 0);
}

// A top_k far above the candidates reserves what the ranking can hold, not top_k entries:
// answered on an idle server (it was refused as "busy, retry later": 1526 MiB reserved).
TEST_F(ServerSchedulingTest, AHugeTopKIsAnsweredWithEveryCandidate) {
  ASSERT_NO_FATAL_FAILURE(StartServer({}));
  grpc::ClientContext context;
  kg::v1::RankTailsRequest request = RankEveryTail("e1");
  request.mutable_options()->set_top_k(100000000);
  kg::v1::RankResponse ranking;
  const grpc::Status status = stub_->RankTails(&context, request, &ranking);
  ASSERT_TRUE(status.ok()) << status.error_message();
  grpc::ClientContext stats_context;
  kg::v1::GetStatsResponse stats;
  ASSERT_TRUE(stub_->GetStats(&stats_context, kg::v1::GetStatsRequest(), &stats).ok());
  EXPECT_EQ(ranking.ranked_size(), static_cast<int>(stats.entities()) - 1);
}

TEST_F(ServerSchedulingTest, OverloadIsRefusedWithTheLimitAndTheServerKeepsServing) {
  // The global limit, whoever calls (one connection would otherwise meet its share first).
  ASSERT_NO_FATAL_FAILURE(
      StartServer({"--max-calls-in-flight=1", "--max-batch-size=4", "--max-caller-share=1"}));
  bool refused = false;
  for (int attempt = 0; attempt < 5 && !refused; ++attempt) {
    // A call counts until the server has released it, a moment after its client has the
    // answer (the graph's AddTriples stream, the previous attempt's calls).
    while (Metric("grail_calls_in_flight") != 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    std::atomic<bool> ranking_done{false};
    std::thread ranker([&] {
      grpc::ClientContext context;
      kg::v1::RankResponse ranking;
      EXPECT_TRUE(stub_->RankTails(&context, RankEveryTail("e1"), &ranking).ok());
      ranking_done = true;
    });
    while (!ranking_done.load() && Metric("grail_calls_in_flight") < 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    grpc::ClientContext context;
    kg::v1::ScoreTripletRequest request;
    *request.mutable_triple() = ToProto({"e2", "r0", "e3"});
    kg::v1::ScoreTripletResponse score;
    const grpc::Status status = stub_->ScoreTriplet(&context, request, &score);
    const bool ranking_was_running = !ranking_done.load();
    ranker.join();
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      EXPECT_THAT(status.error_message(), HasSubstr("--max-calls-in-flight"));
      refused = true;
    } else {
      // Admitted only if the ranking was over by then.
      EXPECT_FALSE(ranking_was_running) << status.error_message();
    }
  }
  EXPECT_TRUE(refused);
  EXPECT_GE(Metric("grail_rejected_calls_total\\{limit=\"max_calls_in_flight\"\\}"), 1);
  // The server keeps serving once the ranking has released its place (a moment after its
  // client got the answer).
  while (Metric("grail_calls_in_flight") != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  grpc::ClientContext context;
  kg::v1::ScoreTripletRequest request;
  *request.mutable_triple() = ToProto({"e2", "r0", "e3"});
  kg::v1::ScoreTripletResponse score;
  EXPECT_TRUE(stub_->ScoreTriplet(&context, request, &score).ok());
  EXPECT_EQ(HealthStatus(channel_), 1);
}

TEST_F(ServerSchedulingTest, WorkOfAnExpiredDeadlineIsDroppedAndCounted) {
  ASSERT_NO_FATAL_FAILURE(StartServer({"--max-batch-size=4"}));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(10));
  kg::v1::RankResponse ranking;
  EXPECT_EQ(stub_->RankTails(&context, RankEveryTail("e1"), &ranking).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  // The server ends the call at its deadline too; its count follows within moments.
  double dropped = 0;
  for (int i = 0; i < 1000 && dropped <= 0; ++i) {
    dropped = Metric("grail_dropped_calls_total\\{reason=\"deadline\"\\}");
    if (dropped <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(dropped, 1);
  EXPECT_EQ(Metric("grail_dropped_calls_total\\{reason=\"cancelled\"\\}"), 0);
  EXPECT_EQ(Metric("grail_scoring_calls"), 0);
  kg::v1::ScoreTripletResponse score;
  grpc::ClientContext score_context;
  kg::v1::ScoreTripletRequest request;
  *request.mutable_triple() = ToProto({"e2", "r0", "e3"});
  EXPECT_TRUE(stub_->ScoreTriplet(&score_context, request, &score).ok());
}

// Servers of their own: restart, drain, limits, start-up errors.
class ServerLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        SaveUntrainedModel(dir_.Sub("model.pt"), kRelations, /*seed=*/3, TwoHopConfig()).ok());
  }
  std::vector<std::string> Flags() {
    return {"--model=" + dir_.Sub("model.pt"), "--data-dir=" + dir_.Sub("store")};
  }
  ScopedTempDir dir_;
};

TEST_F(ServerLifecycleTest, RestartWithTheSameDirectoryGivesIdenticalScores) {
  const std::vector<NamedTriple> graph = RandomGraph(40, 150, 9);
  std::vector<NamedTriple> queries;
  for (int i = 0; i < 25; ++i)
    queries.push_back({absl::StrCat("e", i), kRelations[i % 4], absl::StrCat("e", 39 - i)});
  std::vector<float> before;
  kg::v1::GetStatsResponse stats_before;
  {
    ServerProcess server;
    ASSERT_TRUE(server.Start(Flags(), dir_.Sub("first.log")));
    auto stub = KnowledgeGraph::NewStub(
        grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
    ASSERT_TRUE(AddChunks(*stub, {graph}).status.ok());
    for (const NamedTriple& q : queries) {
      grpc::ClientContext context;
      kg::v1::ScoreTripletRequest request;
      *request.mutable_triple() = ToProto(q);
      kg::v1::ScoreTripletResponse response;
      ASSERT_TRUE(stub->ScoreTriplet(&context, request, &response).ok());
      before.push_back(response.score());
    }
    grpc::ClientContext context;
    ASSERT_TRUE(stub->GetStats(&context, kg::v1::GetStatsRequest(), &stats_before).ok());
    // Without a connected client the drain does not wait for its connection to close.
    stub.reset();
    EXPECT_EQ(server.Stop(SIGTERM), 0) << server.Log();
    EXPECT_THAT(server.Log(), HasSubstr("\"event\":\"stopped\""));
  }
  ServerProcess server;
  ASSERT_TRUE(server.Start(Flags(), dir_.Sub("second.log")));
  auto stub = KnowledgeGraph::NewStub(
      grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  kg::v1::GetStatsResponse stats;
  ASSERT_TRUE(stub->GetStats(&context, kg::v1::GetStatsRequest(), &stats).ok());
  EXPECT_EQ(stats.entities(), stats_before.entities());
  EXPECT_EQ(stats.facts(), stats_before.facts());
  EXPECT_EQ(stats.relations(), stats_before.relations());
  EXPECT_EQ(stats.graph_sequence(), stats_before.graph_sequence());
  for (size_t i = 0; i < queries.size(); ++i) {
    grpc::ClientContext c;
    kg::v1::ScoreTripletRequest request;
    *request.mutable_triple() = ToProto(queries[i]);
    kg::v1::ScoreTripletResponse response;
    ASSERT_TRUE(stub->ScoreTriplet(&c, request, &response).ok());
    EXPECT_EQ(response.score(), before[i]) << "query " << i;
  }
}

TEST_F(ServerLifecycleTest, SigtermDrainsCallsInFlight) {
  std::vector<std::string> flags = Flags();
  flags.push_back("--max-request-triples=1000000");
  flags.push_back("--drain-seconds=120");
  // A call still scoring when SIGTERM arrives must complete. If the machine is fast enough
  // to finish before the signal, try again with more work.
  for (int triples = 20000; triples <= 640000; triples *= 2) {
    ServerProcess server;
    ASSERT_TRUE(server.Start(flags, dir_.Sub("drain.log")));
    auto stub = KnowledgeGraph::NewStub(
        grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
    ASSERT_TRUE(AddChunks(*stub, {RandomGraph(60, 240, 1)}).status.ok());
    kg::v1::ScoreTripletsRequest request;
    for (int i = 0; i < triples; ++i)
      *request.add_triples() = ToProto({absl::StrCat("e", i % 59), "r1", "e59"});
    std::atomic<bool> finished{false};
    grpc::Status status;
    kg::v1::ScoreTripletsResponse response;
    std::thread call([&] {
      grpc::ClientContext context;
      status = stub->ScoreTriplets(&context, request, &response);
      finished = true;
    });
    // Wait until the server is working on the call (its subgraphs are being extracted),
    // so the call was certainly received before the signal.
    httplib::Client metrics("127.0.0.1", server.metrics_port());
    bool started = false;
    while (!started && !finished.load()) {
      httplib::Result scrape = metrics.Get("/metrics");
      std::smatch m;
      started =
          scrape &&
          std::regex_search(scrape->body, m, std::regex(R"(\ngrail_subgraph_nodes_count (\d+))")) &&
          std::stoll(m[1]) > 0;
      if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    const bool in_flight = !finished.load();
    server.Signal(SIGTERM);
    call.join();
    stub.reset();
    EXPECT_EQ(server.Wait(), 0) << server.Log();
    if (!in_flight) continue;
    EXPECT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.results_size(), triples);
    EXPECT_THAT(server.Log(), HasSubstr("\"event\":\"draining\""));
    EXPECT_THAT(server.Log(), HasSubstr("\"all_calls_finished\":true"));
    return;
  }
  FAIL() << "every call finished before SIGTERM; could not observe a drain";
}

TEST_F(ServerLifecycleTest, RequestsAboveTheLimitsAreRefused) {
  std::vector<std::string> flags = Flags();
  flags.push_back("--max-request-triples=10");
  flags.push_back("--max-message-bytes=65536");
  flags.push_back("--max-chunk-facts=5");
  ServerProcess server;
  ASSERT_TRUE(server.Start(flags, dir_.Sub("limits.log")));
  auto stub = KnowledgeGraph::NewStub(
      grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()));
  ASSERT_TRUE(AddChunks(*stub, {{{"a", "r0", "b"}, {"b", "r1", "c"}}}).status.ok());
  kg::v1::ScoreTripletsRequest request;
  for (int i = 0; i < 11; ++i) *request.add_triples() = ToProto({"a", "r0", "c"});
  grpc::ClientContext context;
  kg::v1::ScoreTripletsResponse response;
  grpc::Status s = stub->ScoreTriplets(&context, request, &response);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(s.error_message(), HasSubstr("limit is 10"));

  kg::v1::ScoreTripletRequest big;
  *big.mutable_triple() = ToProto({std::string(100000, 'x'), "r0", "c"});
  grpc::ClientContext big_context;
  kg::v1::ScoreTripletResponse big_response;
  EXPECT_EQ(stub->ScoreTriplet(&big_context, big, &big_response).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);

  std::vector<NamedTriple> chunk;
  for (int i = 0; i < 6; ++i) chunk.push_back({absl::StrCat("n", i), "r0", "a"});
  const AddOutcome added = AddChunks(*stub, {chunk});
  EXPECT_EQ(added.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  stub.reset();
  EXPECT_EQ(server.Stop(SIGTERM), 0);
}

TEST_F(ServerLifecycleTest, UnreadableModelFailsTheStartNamingThePath) {
  ServerProcess server;
  std::vector<std::string> flags = {"--model=" + dir_.Sub("missing.pt"),
                                    "--data-dir=" + dir_.Sub("store")};
  // Start() reports the early exit as a test failure; expect exactly that here.
  ::testing::TestPartResultArray failures;
  {
    ::testing::ScopedFakeTestPartResultReporter reporter(
        ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ONLY_CURRENT_THREAD, &failures);
    EXPECT_FALSE(server.Start(flags, dir_.Sub("bad.log"), std::chrono::seconds(60)));
  }
  ASSERT_EQ(failures.size(), 1);
  EXPECT_THAT(failures.GetTestPartResult(0).message(), HasSubstr("exited with 1"));
  EXPECT_THAT(server.Log(), HasSubstr("missing.pt"));
  EXPECT_THAT(server.Log(), HasSubstr("\"during\":\"loading the model\""));
}

}  // namespace
}  // namespace grail
