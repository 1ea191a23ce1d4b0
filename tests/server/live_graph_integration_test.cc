// A live graph's lifecycle against the real grail-server binary (loopback port, real RocksDB
// directory, real gRPC): facts removed while serving, removals that survive kill -9, and the
// model replaced while serving (ReloadModel, SIGHUP) with its warm-up.
#include <httplib.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/client_unary_call.h"
#include "grpcpp/support/sync_stream.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "nlohmann/json.hpp"
#include "tests/testing/archive_surgery.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"
#include "tests/testing/wal_damage.h"

namespace grail {
namespace {

using kg::v1::KnowledgeGraph;
using ::testing::HasSubstr;
using ::testing::Not;

const std::vector<std::string> kRelations = {"r0", "r1", "r2", "r3"};

// Distinct facts over `entities` entities named n0.., without self-loops.
std::vector<NamedTriple> DistinctFacts(int entities, int facts, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> entity(0, entities - 1), relation(0, 3);
  std::vector<NamedTriple> out;
  std::set<std::tuple<int, int, int>> seen;
  while (static_cast<int>(out.size()) < facts) {
    const int h = entity(random), r = relation(random), t = entity(random);
    if (h == t || !seen.insert({h, r, t}).second) continue;
    out.push_back({absl::StrCat("n", h), kRelations[r], absl::StrCat("n", t)});
  }
  return out;
}

std::vector<std::vector<NamedTriple>> Chunked(const std::vector<NamedTriple>& facts, size_t size) {
  std::vector<std::vector<NamedTriple>> chunks;
  for (size_t i = 0; i < facts.size(); i += size) {
    chunks.emplace_back(facts.begin() + i, facts.begin() + std::min(facts.size(), i + size));
  }
  return chunks;
}

class LiveGraphServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        SaveUntrainedModel(dir_.Sub("model.pt"), kRelations, /*seed=*/5, TwoHopConfig()).ok());
  }
  std::vector<std::string> Flags() const {
    return {"--model=" + dir_.Sub("model.pt"), "--data-dir=" + dir_.Sub("store"),
            "--max-request-triples=100000"};
  }
  bool Start(const std::string& log) {
    if (!server_.Start(Flags(), dir_.Sub(log))) return false;
    stub_ = KnowledgeGraph::NewStub(
        grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
    return true;
  }

  kg::v1::ScoreTripletResponse Score(const NamedTriple& t) {
    grpc::ClientContext context;
    kg::v1::ScoreTripletRequest request;
    *request.mutable_triple() = ToProto(t);
    kg::v1::ScoreTripletResponse response;
    const grpc::Status status = stub_->ScoreTriplet(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }
  kg::v1::GetStatsResponse Stats() {
    grpc::ClientContext context;
    kg::v1::GetStatsResponse stats;
    const grpc::Status status = stub_->GetStats(&context, kg::v1::GetStatsRequest(), &stats);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return stats;
  }
  // Whether each of `facts` is stored, by ScoreTriplets' known_fact, on one graph version.
  std::vector<bool> Stored(const std::vector<NamedTriple>& facts) {
    grpc::ClientContext context;
    kg::v1::ScoreTripletsRequest request;
    for (const NamedTriple& t : facts) *request.add_triples() = ToProto(t);
    kg::v1::ScoreTripletsResponse response;
    const grpc::Status status = stub_->ScoreTriplets(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    std::vector<bool> stored;
    for (const auto& r : response.results()) stored.push_back(r.known_fact());
    return stored;
  }

  ScopedTempDir dir_;
  ServerProcess server_;
  std::unique_ptr<KnowledgeGraph::Stub> stub_;
};

TEST_F(LiveGraphServerTest, RemovingFactsRestoresTheScoresOfTheGraphBeforeThem) {
  ASSERT_TRUE(Start("server.log"));
  const std::vector<NamedTriple> graph = DistinctFacts(30, 90, 1);
  ASSERT_TRUE(AddChunks(*stub_, Chunked(graph, 40)).status.ok());
  const NamedTriple query{"n1", "r2", "n2"};
  const float before = Score(query).score();
  const uint64_t facts_before = Stats().facts();

  // Facts between existing entities around the query's two ends change its subgraph.
  const std::vector<NamedTriple> extra = {
      {"n1", "r0", "n7"}, {"n7", "r1", "n2"}, {"n2", "r3", "n1"}, {"n9", "r0", "n1"}};
  std::vector<NamedTriple> new_ones;
  for (const NamedTriple& t : extra) {
    if (std::find(graph.begin(), graph.end(), t) == graph.end()) new_ones.push_back(t);
  }
  ASSERT_FALSE(new_ones.empty());
  ASSERT_TRUE(AddChunks(*stub_, {new_ones}).status.ok());
  EXPECT_NE(Score(query).score(), before);

  // Removed again, plus a fact never stored and a repeat.
  std::vector<NamedTriple> removal = new_ones;
  removal.push_back({"n1", "r0", "nobody"});
  removal.push_back(new_ones.front());
  const RemoveOutcome removed = RemoveChunks(*stub_, {removal});
  ASSERT_TRUE(removed.status.ok()) << removed.status.error_message();
  ASSERT_EQ(removed.acks.size(), 1u);
  EXPECT_EQ(removed.acks[0].facts_removed(), new_ones.size());
  EXPECT_EQ(removed.acks[0].facts_not_present(), 2u);
  EXPECT_EQ(removed.acks[0].chunk_index(), 0u);

  // The very next request sees the removal: same graph, same score, and the version moved.
  const kg::v1::ScoreTripletResponse after = Score(query);
  EXPECT_EQ(after.score(), before);
  EXPECT_EQ(after.graph_sequence(), removed.acks[0].sequence());
  EXPECT_EQ(Stats().facts(), facts_before);
  EXPECT_FALSE(Score(new_ones.front()).known_fact());
}

TEST_F(LiveGraphServerTest, AnEntityLeftWithoutFactsIsStillResolvable) {
  ASSERT_TRUE(Start("server.log"));
  ASSERT_TRUE(
      AddChunks(*stub_, {{{"a", "r0", "b"}, {"b", "r1", "c"}, {"c", "r2", "d"}}}).status.ok());
  ASSERT_TRUE(RemoveChunks(*stub_, {{{"a", "r0", "b"}}}).status.ok());
  const kg::v1::ScoreTripletResponse response = Score({"a", "r0", "c"});
  EXPECT_FALSE(response.known_fact());
  EXPECT_EQ(Stats().entities(), 4u);
  EXPECT_EQ(Stats().facts(), 2u);
}

TEST_F(LiveGraphServerTest, ARemovedEntityIsNotFoundAndLeftOutOfRankingsUntilNamedAgain) {
  ASSERT_TRUE(Start("server.log"));
  std::vector<NamedTriple> graph = DistinctFacts(30, 90, 12);
  // A component of its own: far from everything, so rankings give it the shared score.
  for (int i = 0; i < 5; ++i) {
    graph.push_back({absl::StrCat("far", i), kRelations[i % 4], absl::StrCat("far", i + 1)});
  }
  ASSERT_TRUE(AddChunks(*stub_, {graph}).status.ok());
  const kg::v1::GetStatsResponse before = Stats();
  size_t removed_facts = 2;  // far2's two, and n3's
  for (const NamedTriple& t : graph) removed_facts += (t.head == "n3" || t.tail == "n3") ? 1 : 0;
  ASSERT_GT(removed_facts, 0u);

  grpc::ClientContext context;
  auto stream = stub_->RemoveTriples(&context);
  kg::v1::RemoveTriplesRequest request;
  request.add_entities("n3");
  request.add_entities("nobody");
  request.add_entities("far2");
  kg::v1::RemoveTriplesAck ack;
  ASSERT_TRUE(stream->Write(request));
  ASSERT_TRUE(stream->Read(&ack));
  // An empty entity name rejects its chunk, naming it.
  kg::v1::RemoveTriplesRequest bad;
  bad.add_entities("n4");
  bad.add_entities("");
  ASSERT_TRUE(stream->Write(bad));
  EXPECT_FALSE(stream->Read(&ack));
  stream->WritesDone();
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("entities[1]"));
  EXPECT_EQ(ack.entities_removed(), 2u);
  EXPECT_EQ(ack.entities_not_present(), 1u);
  EXPECT_EQ(ack.facts_removed(), removed_facts);

  const kg::v1::GetStatsResponse after = Stats();
  EXPECT_EQ(after.entities(), before.entities() - 2);
  EXPECT_EQ(after.facts(), before.facts() - removed_facts);
  {
    grpc::ClientContext c;
    kg::v1::ScoreTripletRequest score;
    *score.mutable_triple() = ToProto({"n1", "r0", "n3"});
    kg::v1::ScoreTripletResponse response;
    const grpc::Status missing = stub_->ScoreTriplet(&c, score, &response);
    EXPECT_EQ(missing.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_THAT(missing.error_message(), HasSubstr("n3"));
  }
  {
    // Every live entity but the head is ranked; n3 and far2 are not among them, n4 and the
    // rest of the far component are.
    grpc::ClientContext c;
    kg::v1::RankTailsRequest rank;
    rank.set_head("n1");
    rank.set_relation("r0");
    kg::v1::RankResponse response;
    ASSERT_TRUE(stub_->RankTails(&c, rank, &response).ok());
    EXPECT_EQ(response.candidates_scored(), after.entities() - 1);
    std::set<std::string> ranked;
    for (const kg::v1::RankedEntity& e : response.ranked()) ranked.insert(e.entity());
    EXPECT_EQ(ranked.count("n3"), 0u);
    EXPECT_EQ(ranked.count("far2"), 0u);
    EXPECT_EQ(ranked.count("n4"), 1u);
    for (const char* kept : {"far0", "far1", "far3", "far4", "far5"}) {
      EXPECT_EQ(ranked.count(kept), 1u) << kept;
    }
    EXPECT_GT(response.candidates_shared_score(), 0u);
    EXPECT_EQ(ranked.size(), after.entities() - 1);
  }
  // Named again, it is back.
  const AddOutcome added = AddChunks(*stub_, {{{"n3", "r1", "n1"}}});
  ASSERT_TRUE(added.status.ok());
  EXPECT_EQ(added.acks[0].entities_created(), 1u);
  EXPECT_TRUE(Score({"n3", "r1", "n1"}).known_fact());
  EXPECT_EQ(Stats().entities(), before.entities() - 1);

  const std::string file = dir_.Sub("entities.txt");
  std::ofstream(file) << "n3\nn5\nnobody\n";
  const BinaryRun run = RunBinary(
      "grail-client", "--target " + server_.target() + " remove-entities " + file + " --chunk 2");
  ASSERT_EQ(run.exit_code, 0) << run.all();
  EXPECT_THAT(run.out,
              HasSubstr("chunks_acknowledged=2 entities_removed=2 entities_not_present=1"));
  EXPECT_EQ(Stats().entities(), before.entities() - 3);
}

TEST_F(LiveGraphServerTest, BadRemovalChunkIsRejectedWholeNamingItsLineAndEarlierChunksStay) {
  ASSERT_TRUE(Start("server.log"));
  const std::vector<NamedTriple> graph = DistinctFacts(20, 40, 2);
  ASSERT_TRUE(AddChunks(*stub_, {graph}).status.ok());
  // Lines 11-12 are removed; the chunk of lines 13-15 has an empty relation on line 14.
  const std::vector<NamedTriple> good = {graph[0], graph[1]};
  const std::vector<NamedTriple> bad = {graph[2], {"n1", "", "n2"}, graph[3]};
  const RemoveOutcome outcome = RemoveChunks(*stub_, {good, bad}, /*first_line=*/11);
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("line 14"));
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("relation name is empty"));
  ASSERT_EQ(outcome.acks.size(), 1u);
  EXPECT_EQ(outcome.acks[0].facts_removed(), 2u);
  EXPECT_EQ(Stored({graph[0], graph[1], graph[2], graph[3]}),
            (std::vector<bool>{false, false, true, true}));
  EXPECT_EQ(Stats().facts(), graph.size() - 2);
}

// A chunk over --max-chunk-facts is refused saying what it holds ("(lines 1-0)" for a chunk
// of entities only, before).
TEST_F(LiveGraphServerTest, AnOversizedRemovalChunkSaysWhatItHolds) {
  std::vector<std::string> flags = Flags();
  flags.push_back("--max-chunk-facts=2");
  ASSERT_TRUE(server_.Start(flags, dir_.Sub("server.log")));
  stub_ = KnowledgeGraph::NewStub(
      grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  auto stream = stub_->RemoveTriples(&context);
  kg::v1::RemoveTriplesRequest request;
  for (const char* name : {"n1", "n2", "n3"}) request.add_entities(name);
  request.add_relations("r0");
  ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  kg::v1::RemoveTriplesAck ack;
  EXPECT_FALSE(stream->Read(&ack));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(status.error_message(), HasSubstr("chunk 0 (3 entities, 1 relations) has 4 items"));
  EXPECT_THAT(status.error_message(), Not(HasSubstr("lines")));
}

TEST_F(LiveGraphServerTest, ClientBinaryRemovesAFileAndPrintsWhatWasRemoved) {
  ASSERT_TRUE(Start("server.log"));
  const std::vector<NamedTriple> graph = DistinctFacts(20, 40, 3);
  ASSERT_TRUE(AddChunks(*stub_, {graph}).status.ok());
  const std::string file = dir_.Sub("remove.tsv");
  {
    std::ofstream out(file);
    for (int i = 0; i < 5; ++i)
      out << graph[i].head << "\t" << graph[i].relation << "\t" << graph[i].tail << "\n";
    out << "n1\tr0\tnobody\n";
  }
  const BinaryRun run =
      RunBinary("grail-client", "--target " + server_.target() + " remove " + file + " --chunk 2");
  ASSERT_EQ(run.exit_code, 0) << run.all();
  EXPECT_THAT(run.out, HasSubstr("chunks_acknowledged=3"));
  EXPECT_THAT(run.out, HasSubstr("facts_removed=5"));
  EXPECT_THAT(run.out, HasSubstr("facts_not_present=1"));
  EXPECT_EQ(Stats().facts(), graph.size() - 5);
}

TEST_F(LiveGraphServerTest, ExplainReturnsTheStrongestPathsAsRuleBodiesWithTheirWeights) {
  ASSERT_TRUE(Start("server.log"));
  ASSERT_TRUE(AddChunks(*stub_, {{{"a", "r0", "b"},
                                  {"b", "r1", "c"},
                                  {"c", "r3", "d"},
                                  {"d", "r2", "a"},
                                  {"a", "r1", "c"},
                                  {"e", "r0", "a"}}})
                  .status.ok());
  grpc::ClientContext context;
  kg::v1::ScoreTripletRequest request;
  *request.mutable_triple() = ToProto({"a", "r2", "c"});
  request.set_explain(true);
  request.set_max_paths(2);
  kg::v1::ScoreTripletResponse response;
  ASSERT_TRUE(stub_->ScoreTriplet(&context, request, &response).ok());
  EXPECT_EQ(response.score(), Score({"a", "r2", "c"}).score());
  // The most paths a call may ask for is bounded (what an answer holds).
  {
    grpc::ClientContext too_many_context;
    kg::v1::ScoreTripletRequest too_many = request;
    too_many.set_max_paths(101);
    kg::v1::ScoreTripletResponse refused;
    const grpc::Status status = stub_->ScoreTriplet(&too_many_context, too_many, &refused);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(), HasSubstr("at most 100 paths"));
  }
  // Paths of at most 2 edges (k = 2) from a to c: a-r1->c, a-r0->b-r1->c, a<-r2-d<-r3-c.
  ASSERT_EQ(response.paths_size(), 2);
  std::set<std::string> rules;
  for (const kg::v1::ExplanationPath& path : response.paths()) {
    rules.insert(path.rule());
    ASSERT_EQ(path.layer_weights_size(), TwoHopConfig().num_layers);
    double product = 1;
    for (int l = 0; l < path.layer_weights_size(); ++l) {
      double layer = 1;
      for (const kg::v1::PathStep& step : path.steps()) layer *= step.attention(l);
      EXPECT_NEAR(path.layer_weights(l), layer, 1e-6 * layer);
      product *= path.layer_weights(l);
    }
    EXPECT_NEAR(path.weight(), product, 1e-6 * product);
    EXPECT_EQ(path.steps(0).from_entity(), "a");
    EXPECT_EQ(path.steps(path.steps_size() - 1).to_entity(), "c");
  }
  EXPECT_GE(response.paths(0).weight(), response.paths(1).weight());
  const std::set<std::string> possible = {"r1(h,t)", "r0(h,z1) ∧ r1(z1,t)",
                                          "r2^-1(h,z1) ∧ r3^-1(z1,t)"};
  for (const std::string& rule : rules) EXPECT_TRUE(possible.count(rule)) << rule;

  const BinaryRun run = RunBinary(
      "grail-client", "--target " + server_.target() + " score a r2 c --explain --paths 3");
  ASSERT_EQ(run.exit_code, 0) << run.all();
  const std::vector<std::string> lines = absl::StrSplit(run.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 4u) << run.out;  // the score, then the three paths
  EXPECT_THAT(run.out, HasSubstr("\tr0(h,z1) ∧ r1(z1,t)\ta -r0-> b -r1-> c"));
  EXPECT_THAT(run.out, HasSubstr("\tr2^-1(h,z1) ∧ r3^-1(z1,t)\ta <-r2- d <-r3- c"));
}

// kill -9 while a removal stream is being applied: after a restart on the same directory
// exactly a prefix of the stream's chunks is removed, every acknowledged chunk in it, and
// at most the chunks sent and not acknowledged beyond it, each of them whole.
TEST_F(LiveGraphServerTest, KilledServerKeepsExactlyTheAcknowledgedRemovals) {
  ASSERT_TRUE(Start("first.log"));
  const std::vector<NamedTriple> graph = DistinctFacts(300, 3000, 4);
  ASSERT_TRUE(AddChunks(*stub_, Chunked(graph, 500)).status.ok());
  const uint64_t base = Stats().graph_sequence();
  // Remove every fact but the last 600, 12 per chunk.
  const std::vector<std::vector<NamedTriple>> chunks =
      Chunked(std::vector<NamedTriple>(graph.begin(), graph.end() - 600), 12);

  grpc::ClientContext context;
  auto stream = stub_->RemoveTriples(&context);
  std::atomic<size_t> sent{0};
  std::thread writer([&] {
    for (const auto& chunk : chunks) {
      kg::v1::RemoveTriplesRequest request;
      for (const NamedTriple& t : chunk) *request.add_triples() = ToProto(t);
      if (!stream->Write(request)) return;
      sent.fetch_add(1);
    }
  });
  std::vector<kg::v1::RemoveTriplesAck> acks;
  kg::v1::RemoveTriplesAck ack;
  int killed = 0;  // the server's exit code: -1 when SIGKILL ended it
  while (stream->Read(&ack)) {
    acks.push_back(ack);
    if (acks.size() == 25) killed = server_.Stop(SIGKILL);
  }
  writer.join();
  ASSERT_EQ(killed, -1);
  const grpc::Status status = stream->Finish();
  EXPECT_FALSE(status.ok());
  ASSERT_GE(acks.size(), 25u);
  ASSERT_LT(acks.size(), chunks.size()) << "the stream ended before the kill";
  for (size_t i = 0; i < acks.size(); ++i) {
    ASSERT_EQ(acks[i].sequence(), base + 1 + i);
    ASSERT_EQ(acks[i].facts_removed(), chunks[i].size());
  }

  ASSERT_TRUE(Start("second.log"));
  const uint64_t applied = Stats().graph_sequence() - base;
  EXPECT_GE(applied, acks.size()) << "an acknowledged removal was lost";
  EXPECT_LE(applied, sent.load()) << "a removal appeared that was never sent";
  const std::vector<bool> stored = Stored(graph);
  size_t removed = 0;
  for (size_t c = 0; c < chunks.size(); ++c) {
    for (size_t i = 0; i < chunks[c].size(); ++i) {
      ASSERT_EQ(stored[c * 12 + i], c >= applied) << "chunk " << c << " fact " << i;
    }
    if (c < applied) removed += chunks[c].size();
  }
  for (size_t i = graph.size() - 600; i < graph.size(); ++i) ASSERT_TRUE(stored[i]);
  EXPECT_EQ(Stats().facts(), graph.size() - removed);
}

// A write-ahead log damaged before its end (not a crash's torn tail): the server refuses
// to start rather than silently serve a graph missing acknowledged chunks, and starts past
// the damage only when told to, saying so in its log and its metrics.
TEST_F(LiveGraphServerTest, ACorruptedWalStopsTheStartUnlessTruncationIsAsked) {
  ASSERT_TRUE(Start("first.log"));
  std::vector<std::vector<NamedTriple>> chunks;
  for (int i = 0; i < 40; ++i) {
    chunks.push_back({{absl::StrCat("a", i), "r0", absl::StrCat("b", i)}});
  }
  ASSERT_EQ(AddChunks(*stub_, chunks).acks.size(), 40u);
  ASSERT_EQ(server_.Stop(SIGKILL), -1);

  const DamagedWal wal = FlipAByteOfTheLargestWal(dir_.Sub("store"), 1.0 / 3);
  ASSERT_FALSE(wal.path.empty());

  std::string flags;
  for (const std::string& flag : Flags()) absl::StrAppend(&flags, " '", flag, "'");
  const BinaryRun refused = RunBinary("grail-server", "--port=0 --metrics-port=-1" + flags);
  EXPECT_EQ(refused.exit_code, 1) << refused.all();
  EXPECT_THAT(refused.err, HasSubstr("corrupted write-ahead log"));
  EXPECT_EQ(std::filesystem::file_size(wal.path), wal.size);

  std::vector<std::string> truncate = Flags();
  truncate.push_back("--truncate-corrupted-wal");
  ASSERT_TRUE(server_.Start(truncate, dir_.Sub("second.log")));
  stub_ = KnowledgeGraph::NewStub(
      grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
  EXPECT_LT(Stats().graph_sequence(), 40u);
  EXPECT_THAT(server_.Log(), HasSubstr("\"event\":\"store_recovered_with_loss\""));
  httplib::Client metrics("127.0.0.1", server_.metrics_port());
  httplib::Result scrape = metrics.Get("/metrics");
  ASSERT_TRUE(scrape);
  EXPECT_THAT(scrape->body, HasSubstr("grail_store_wal_truncated 1"));
}

// One raw chunk stream: sends `chunks` in order, each after the previous one's ack; returns
// the number of acks and the final status.
std::pair<int, grpc::Status> RawChunkStream(const std::shared_ptr<grpc::Channel>& channel,
                                            const char* method,
                                            const std::vector<grpc::ByteBuffer>& chunks) {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>> stream(
      grpc::internal::ClientReaderWriterFactory<grpc::ByteBuffer, grpc::ByteBuffer>::Create(
          channel.get(),
          grpc::internal::RpcMethod(method, grpc::internal::RpcMethod::BIDI_STREAMING), &context));
  int acks = 0;
  for (const grpc::ByteBuffer& chunk : chunks) {
    grpc::ByteBuffer ack;
    if (!stream->Write(chunk) || !stream->Read(&ack)) break;
    ++acks;
  }
  stream->WritesDone();
  return {acks, stream->Finish()};
}

TEST_F(LiveGraphServerTest, InvalidUtf8IsRejectedNamingItsChunkAndLineAndNothingIsLost) {
  ASSERT_TRUE(Start("server.log"));
  auto channel = grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials());
  kg::v1::AddTriplesRequest good;
  good.set_first_line(1);
  for (const NamedTriple& t : std::vector<NamedTriple>{{"u1", "r0", "u2"}, {"u2", "r1", "u3"}}) {
    *good.add_triples() = ToProto(t);
  }
  kg::v1::AddTriplesRequest bad;
  bad.set_first_line(3);
  for (const NamedTriple& t :
       std::vector<NamedTriple>{{"u3", "r0", "u4"}, {"u4", "r1", "xBADx"}, {"u5", "r2", "u1"}}) {
    *bad.add_triples() = ToProto(t);
  }
  const auto [acks, status] = RawChunkStream(channel, "/kg.v1.KnowledgeGraph/AddTriples",
                                             {WithInvalidUtf8(good), WithInvalidUtf8(bad)});
  EXPECT_EQ(acks, 1);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("line 4: the tail is not valid UTF-8"));
  EXPECT_THAT(status.error_message(), HasSubstr("chunk 1"));
  EXPECT_TRUE(Score({"u1", "r0", "u2"}).known_fact());  // chunk 0 stays
  EXPECT_EQ(Stats().facts(), 2u);                       // nothing of chunk 1

  // Entities and relations removed by name: the bad one is named by its field and index, and
  // nothing of the removal is applied.
  kg::v1::RemoveTriplesRequest entities, relations;
  entities.add_entities("u1");
  entities.add_entities("BAD");
  relations.add_relations("r0");
  relations.add_relations("rBAD");
  for (const auto& [removal, names] : {std::pair{&entities, "entities[1] is not valid UTF-8"},
                                       std::pair{&relations, "relations[1] is not valid UTF-8"}}) {
    const auto [removal_acks, refused] =
        RawChunkStream(channel, "/kg.v1.KnowledgeGraph/RemoveTriples", {WithInvalidUtf8(*removal)});
    EXPECT_EQ(removal_acks, 0) << names;
    EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << names;
    EXPECT_THAT(refused.error_message(), HasSubstr(names));
    EXPECT_EQ(Stats().entities(), 3u);
    EXPECT_TRUE(Score({"u1", "r0", "u2"}).known_fact());
  }

  kg::v1::ScoreTripletRequest score;
  *score.mutable_triple() = ToProto({"uBAD", "r0", "u2"});
  grpc::ClientContext context;
  grpc::ByteBuffer response;
  const grpc::Status unary = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
      channel.get(),
      grpc::internal::RpcMethod("/kg.v1.KnowledgeGraph/ScoreTriplet",
                                grpc::internal::RpcMethod::NORMAL_RPC),
      &context, WithInvalidUtf8(score), &response);
  EXPECT_EQ(unary.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(unary.error_message(), HasSubstr("ScoreTriplet request could not be parsed"));
  // No handler saw that call; it is counted all the same.
  EXPECT_EQ(
      ScrapedMetric(server_.metrics_port(),
                    R"(grail_requests_total\{code="INVALID_ARGUMENT",method="ScoreTriplet"\})"),
      1);

  // The server keeps serving, and its log stays one JSON object per line.
  EXPECT_TRUE(Score({"u2", "r1", "u3"}).known_fact());
  std::istringstream log(server_.Log());
  for (std::string line; std::getline(log, line);) {
    EXPECT_TRUE(nlohmann::json::accept(line)) << line;
  }
}

TEST_F(LiveGraphServerTest, AStreamEndedByItsDeadlineIsCountedAsDeadlineExceeded) {
  ASSERT_TRUE(Start("server.log"));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
  auto stream = stub_->AddTriples(&context);
  kg::v1::AddTriplesRequest chunk;
  *chunk.add_triples() = ToProto({"d1", "r0", "d2"});
  ASSERT_TRUE(stream->Write(chunk));
  kg::v1::AddTriplesAck ack;
  ASSERT_TRUE(stream->Read(&ack));
  // The client neither sends another chunk nor closes: the server waits for the next chunk
  // until the deadline ends the stream.
  EXPECT_FALSE(stream->Read(&ack));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  const std::string series =
      R"(grail_requests_total\{code="DEADLINE_EXCEEDED",method="AddTriples"\})";
  double counted = -1;
  for (int i = 0; i < 500 && counted < 0; ++i) {  // the server ends its side a moment later
    counted = ScrapedMetric(server_.metrics_port(), series);
    if (counted < 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(counted, 1);
  EXPECT_EQ(ScrapedMetric(server_.metrics_port(),
                          R"(grail_requests_total\{code="CANCELLED",method="AddTriples"\})"),
            -1);
  EXPECT_TRUE(Score({"d1", "r0", "d2"}).known_fact());
}

TEST_F(LiveGraphServerTest, AMisspeltEnvironmentSettingIsLoggedAsAWarning) {
  setenv("GRAIL_MAX_BATCH_SIZ", "3", 1);  // GRAIL_MAX_BATCH_SIZE, misspelt
  const bool started = Start("server.log");
  unsetenv("GRAIL_MAX_BATCH_SIZ");
  ASSERT_TRUE(started);
  bool warned = false;
  std::istringstream log(server_.Log());
  for (std::string line; std::getline(log, line);) {
    const nlohmann::json event = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (event.is_object() && event.value("event", "") == "warning" && event.contains("variables")) {
      // (The test's own environment may hold others, e.g. GRAIL_CRASH_KILLS.)
      for (const nlohmann::json& name : event["variables"]) {
        warned = warned || name == "GRAIL_MAX_BATCH_SIZ";
      }
    }
  }
  EXPECT_TRUE(warned) << server_.Log();
}

TEST_F(LiveGraphServerTest, AChunkWhoseLinesWouldWrapIsRefused) {
  ASSERT_TRUE(Start("server.log"));
  const AddOutcome outcome = AddChunks(*stub_, {{{"a", "r0", "b"}, {"b", "r1", "c"}}},
                                       /*first_line=*/std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(outcome.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(outcome.status.error_message(), HasSubstr("leaves no room for its 2 lines"));
  EXPECT_EQ(Stats().facts(), 0u);
}

TEST_F(LiveGraphServerTest, StartingWithAModelThatLacksStoredRelationsIsLoggedAsAWarning) {
  ASSERT_TRUE(Start("first.log"));
  ASSERT_TRUE(AddChunks(*stub_, {{{"a", "r0", "b"}, {"b", "r3", "c"}}}).status.ok());
  EXPECT_THAT(server_.Log(), Not(HasSubstr("\"unknown_relations\":")));
  stub_.reset();  // no idle connection for the drain to wait for
  ASSERT_EQ(server_.Stop(SIGTERM), 0);
  ASSERT_TRUE(
      SaveUntrainedModel(dir_.Sub("narrow.pt"), {"r0", "r1", "r2"}, 4, TwoHopConfig()).ok());
  std::vector<std::string> flags = Flags();
  flags.push_back("--model=" + dir_.Sub("narrow.pt"));
  ASSERT_TRUE(server_.Start(flags, dir_.Sub("second.log")));
  EXPECT_THAT(server_.Log(), HasSubstr("\"unknown_relations\":[\"r3\"]"));
  EXPECT_THAT(server_.Log(), HasSubstr("does not know 1 of the stored graph's 2 relations"));
}

// --- Model reload -------------------------------------------------------------------------

class ModelReloadTest : public LiveGraphServerTest {
 protected:
  void SetUp() override {
    LiveGraphServerTest::SetUp();
    // B differs from A in its weights and its subgraph radius, so calls on the two models
    // also extract differently.
    GrailConfig three_hops = TwoHopConfig();
    three_hops.hops = 3;
    ASSERT_TRUE(
        SaveUntrainedModel(dir_.Sub("model_b.pt"), kRelations, /*seed=*/6, three_hops).ok());
  }
  grpc::Status Reload(const std::string& path, kg::v1::ReloadModelResponse* response,
                      std::chrono::milliseconds deadline = std::chrono::minutes(10)) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    kg::v1::ReloadModelRequest request;
    request.set_path(path);
    return stub_->ReloadModel(&context, request, response);
  }
  // A copy of model.pt with `statements` more lines of TorchScript for LibTorch's loader to
  // compile: 2,000,000 take the load's probe ~8 s in a Release build on a 2-core AMD EPYC
  // (dev-2c), longer with the sanitizers.
  std::string SlowArchive(int statements = 2000000) {
    const std::string path = dir_.Sub("slow.pt");
    EXPECT_TRUE(WriteWithExtraSource(dir_.Sub("model.pt"), path, SlowToLoadSource(statements)));
    return path;
  }
  // Waits until the server has logged `count` occurrences of `event` (at most two minutes).
  void WaitForLogged(const std::string& event, int count = 1) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    auto occurrences = [&] {
      const std::string log = server_.Log();
      int n = 0;
      for (size_t at = log.find(event); at != std::string::npos; at = log.find(event, at + 1)) ++n;
      return n;
    };
    while (occurrences() < count && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  std::string Metrics() {
    httplib::Client client("127.0.0.1", server_.metrics_port());
    httplib::Result scrape = client.Get("/metrics");
    return scrape ? scrape->body : "";
  }
};

TEST_F(ModelReloadTest, ReloadUnderConcurrentLoadFailsNoCallAndEachAnswerComesFromOneModel) {
  ASSERT_TRUE(Start("server.log"));
  const std::vector<NamedTriple> graph = DistinctFacts(60, 240, 6);
  ASSERT_TRUE(AddChunks(*stub_, Chunked(graph, 100)).status.ok());
  const std::string version_a = Stats().model().version();
  const NamedTriple query{"n1", "r2", "n2"};

  std::atomic<bool> stop{false};
  std::atomic<int64_t> completed{0}, failed{0};
  std::mutex mu;
  std::map<std::string, std::vector<float>> scores_by_version;  // ScoreTriplet of `query`
  std::map<std::string, int> rankings_by_version;
  std::string first_error;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      auto stub = KnowledgeGraph::NewStub(
          grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
      while (!stop.load()) {
        grpc::ClientContext context;
        grpc::Status status;
        std::string version;
        float score = 0;
        if (c % 2 == 0) {
          kg::v1::ScoreTripletRequest request;
          *request.mutable_triple() = ToProto(query);
          kg::v1::ScoreTripletResponse response;
          status = stub->ScoreTriplet(&context, request, &response);
          version = response.model_version();
          score = response.score();
        } else {
          kg::v1::RankTailsRequest request;
          request.set_head("n3");
          request.set_relation("r1");
          request.mutable_options()->set_top_k(5);
          kg::v1::RankResponse response;
          status = stub->RankTails(&context, request, &response);
          version = response.model_version();
        }
        std::lock_guard<std::mutex> lock(mu);
        if (!status.ok()) {
          failed.fetch_add(1);
          if (first_error.empty()) first_error = status.error_message();
        } else if (c % 2 == 0) {
          scores_by_version[version].push_back(score);
        } else {
          ++rankings_by_version[version];
        }
        completed.fetch_add(1);
      }
    });
  }
  // Waits until the clients have finished `calls` more calls.
  auto wait_for_calls = [&](int64_t calls) {
    const int64_t target = completed.load() + calls;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (completed.load() < target && std::chrono::steady_clock::now() < give_up) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  };
  wait_for_calls(40);
  std::string version_b;
  for (const std::string& path : {dir_.Sub("model_b.pt"), dir_.Sub("model.pt"),
                                  dir_.Sub("model_b.pt"), dir_.Sub("model.pt")}) {
    kg::v1::ReloadModelResponse response;
    const grpc::Status status = Reload(path, &response);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(response.model().path(), path);
    if (path == dir_.Sub("model_b.pt")) version_b = response.model().version();
    wait_for_calls(40);
  }
  stop.store(true);
  for (std::thread& t : clients) t.join();

  EXPECT_EQ(failed.load(), 0) << first_error;
  ASSERT_NE(version_a, version_b);
  EXPECT_EQ(Stats().model().generation(), 5u);
  EXPECT_EQ(Stats().model().version(), version_a);
  // Every answer names one of the two models, both models answered, and all answers of one
  // model agree: no call mixed the two.
  ASSERT_EQ(scores_by_version.size(), 2u);
  ASSERT_EQ(scores_by_version.count(version_a) + scores_by_version.count(version_b), 2u);
  EXPECT_EQ(rankings_by_version.count(version_a) + rankings_by_version.count(version_b),
            rankings_by_version.size());
  for (const auto& [version, scores] : scores_by_version) {
    for (float score : scores) {
      ASSERT_LE(std::fabs(score - scores.front()), 1e-5f * std::max(1.0f, std::fabs(score)))
          << version;
    }
  }
  EXPECT_NE(scores_by_version[version_a].front(), scores_by_version[version_b].front());
  EXPECT_THAT(Metrics(), HasSubstr("grail_model_reloads_total{result=\"ok\"} 4"));
}

TEST_F(ModelReloadTest, ABadArchiveIsRefusedNamingItAndTheOldModelKeepsServing) {
  ASSERT_TRUE(Start("server.log"));
  ASSERT_TRUE(AddChunks(*stub_, {DistinctFacts(20, 40, 7)}).status.ok());
  const kg::v1::GetStatsResponse before = Stats();
  const float score = Score({"n1", "r2", "n2"}).score();

  kg::v1::ReloadModelResponse response;
  const std::string missing = dir_.Sub("no-such-model.pt");
  grpc::Status status = Reload(missing, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr(missing));

  const std::string garbage = dir_.Sub("garbage.pt");
  std::ofstream(garbage) << "not a model archive";
  status = Reload(garbage, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr(garbage));

  // A model that does not know r3, which the stored graph uses.
  const std::string narrow = dir_.Sub("narrow.pt");
  ASSERT_TRUE(SaveUntrainedModel(narrow, {"r0", "r1", "r2"}, 8, TwoHopConfig()).ok());
  status = Reload(narrow, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("\"r3\""));

  const kg::v1::GetStatsResponse after = Stats();
  EXPECT_EQ(after.model().version(), before.model().version());
  EXPECT_EQ(after.model().generation(), 1u);
  EXPECT_EQ(Score({"n1", "r2", "n2"}).score(), score);
  // The store still takes r3, the served model's relation.
  EXPECT_TRUE(AddChunks(*stub_, {{{"n1", "r3", "n5"}}}).status.ok());
  EXPECT_THAT(Metrics(), HasSubstr("grail_model_reloads_total{result=\"error\"} 3"));
}

// LibTorch's loader crashes on some archives that are well-formed zips with intact tensor
// records (here, source nested deeper than its parser's stack). The server loads every
// archive in a child process first: the crash is an error naming the file, and the server
// keeps serving; started on such an archive it exits with a message, not a SIGSEGV.
TEST_F(ModelReloadTest, AnArchiveThatCrashesTheLoaderIsRefusedAndTheServerKeepsServing) {
  const std::string crashing = dir_.Sub("crashing.pt");
  ASSERT_TRUE(WriteWithExtraSource(dir_.Sub("model.pt"), crashing, CrashingSource(500000)));
  ASSERT_TRUE(Start("server.log"));
  ASSERT_TRUE(AddChunks(*stub_, {DistinctFacts(20, 40, 7)}).status.ok());
  const float score = Score({"n1", "r2", "n2"}).score();

  kg::v1::ReloadModelResponse response;
  const grpc::Status status = Reload(crashing, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("crashed LibTorch's loader"));
  EXPECT_THAT(status.error_message(), HasSubstr(crashing));
  EXPECT_EQ(Score({"n1", "r2", "n2"}).score(), score);
  EXPECT_EQ(Stats().model().generation(), 1u);

  stub_.reset();
  ASSERT_EQ(server_.Stop(SIGTERM), 0);
  const BinaryRun run =
      RunBinary("grail-server", "--model " + crashing + " --data-dir " + dir_.Sub("store") +
                                    " --port 0 --metrics-port -1");
  EXPECT_EQ(run.exit_code, 1) << run.all();
  EXPECT_THAT(run.all(), HasSubstr("crashed LibTorch's loader"));
}

// A FIFO or a device as the model: refused at once, never read (reading /dev/zero spun
// forever, a FIFO blocked every later reload).
TEST_F(ModelReloadTest, AReloadOfAFifoOrADeviceIsRefusedAtOnce) {
  ASSERT_TRUE(Start("server.log"));
  const std::string fifo = dir_.Sub("fifo.pt");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero"), dir_.path()}) {
    kg::v1::ReloadModelResponse response;
    const grpc::Status status = Reload(path, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << path;
    EXPECT_THAT(status.error_message(), HasSubstr("is not a regular file")) << path;
  }
  EXPECT_EQ(Stats().model().generation(), 1u);
}

// The caller of a slow reload gives up (its deadline): the reload stops and is not applied,
// so the caller's DEADLINE_EXCEEDED means what it says.
TEST_F(ModelReloadTest, AReloadWhoseCallerHasGoneIsNotApplied) {
  ASSERT_TRUE(Start("server.log"));
  const std::string slow = SlowArchive();
  kg::v1::ReloadModelResponse response;
  const grpc::Status status = Reload(slow, &response, std::chrono::milliseconds(1000));
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  WaitForLogged("\"event\":\"model_not_reloaded\"");
  EXPECT_THAT(server_.Log(), HasSubstr("the caller's deadline passed"));
  EXPECT_THAT(server_.Log(), Not(HasSubstr("\"event\":\"model_reloaded\"")));
  EXPECT_EQ(Stats().model().generation(), 1u);
}

// Reloads that wait behind one in progress collapse to the newest; a load longer than
// --model-load-timeout-seconds is refused.
TEST_F(ModelReloadTest, WaitingReloadsCollapseToTheNewestAndALoadIsTimeBounded) {
  std::vector<std::string> flags = Flags();
  flags.push_back("--model-load-timeout-seconds=10");
  ASSERT_TRUE(server_.Start(flags, dir_.Sub("server.log")));
  stub_ = KnowledgeGraph::NewStub(
      grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
  // ~4 times the 10 s bound on the fastest build measured; the probe is killed at the bound,
  // so the size costs only the file's writing.
  const std::string slow = SlowArchive(10000000);
  grpc::Status slow_status, older_status;
  std::thread first([&] {
    kg::v1::ReloadModelResponse response;
    slow_status = Reload(slow, &response);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // let the slow one start
  std::thread older([&] {
    kg::v1::ReloadModelResponse response;
    older_status = Reload(dir_.Sub("model_b.pt"), &response);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // queued behind the slow one
  kg::v1::ReloadModelResponse newest;
  const grpc::Status newest_status = Reload(dir_.Sub("model.pt"), &newest);
  first.join();
  older.join();
  EXPECT_EQ(slow_status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(slow_status.error_message(), HasSubstr("took longer than 10 s"));
  EXPECT_EQ(older_status.error_code(), grpc::StatusCode::ABORTED) << older_status.error_message();
  ASSERT_TRUE(newest_status.ok()) << newest_status.error_message();
  EXPECT_EQ(Stats().model().generation(), 2u);
  EXPECT_EQ(Stats().model().path(), dir_.Sub("model.pt"));
}

// SIGTERM while a reload loads: the load is stopped, the drain is not held, and the server
// exits 0 without applying it.
TEST_F(ModelReloadTest, SigtermDuringAReloadStopsItAndExitsCleanly) {
  ASSERT_TRUE(Start("server.log"));
  ASSERT_TRUE(AddChunks(*stub_, {DistinctFacts(20, 40, 12)}).status.ok());
  const std::string slow = SlowArchive();
  std::thread reload([&] {
    kg::v1::ReloadModelResponse response;
    Reload(slow, &response).ok();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the load under way
  EXPECT_EQ(server_.Stop(SIGTERM), 0);
  reload.join();
  const std::string log = server_.Log();
  EXPECT_THAT(log, HasSubstr("\"event\":\"stopped\""));
  EXPECT_THAT(log, HasSubstr("the process is stopping"));
  EXPECT_THAT(log, Not(HasSubstr("\"event\":\"model_reloaded\"")));
}

// A relation leaves the graph like an entity: removed by name (grail-client
// remove-relations), it stops counting in GetStats and in a new model's vocabulary check
// (a model without it was refused because the store "held" it), durably.
TEST_F(ModelReloadTest, ARelationRemovedByNameNoLongerCountsInStatsOrTheReloadCheck) {
  ASSERT_TRUE(Start("server.log"));
  std::vector<NamedTriple> facts = DistinctFacts(20, 60, 13);
  ASSERT_TRUE(AddChunks(*stub_, {facts}).status.ok());
  ASSERT_EQ(Stats().relations(), 4u);
  const std::string narrow = dir_.Sub("narrow.pt");
  ASSERT_TRUE(SaveUntrainedModel(narrow, {"r0", "r1", "r2"}, 8, TwoHopConfig()).ok());
  kg::v1::ReloadModelResponse response;
  EXPECT_EQ(Reload(narrow, &response).error_code(), grpc::StatusCode::FAILED_PRECONDITION);

  const std::string names = dir_.Sub("relations.txt");
  std::ofstream(names) << "r3\nno-such-relation\n";
  const BinaryRun run =
      RunBinary("grail-client", "--target " + server_.target() + " remove-relations " + names);
  ASSERT_EQ(run.exit_code, 0) << run.all();
  EXPECT_THAT(run.out, HasSubstr("relations_removed=1 relations_not_present=1"));
  const uint64_t r3_facts = std::count_if(facts.begin(), facts.end(),
                                          [](const NamedTriple& t) { return t.relation == "r3"; });
  EXPECT_THAT(run.out, HasSubstr(absl::StrCat("facts_removed=", r3_facts)));
  EXPECT_EQ(Stats().relations(), 3u);
  EXPECT_EQ(Stats().facts(), facts.size() - r3_facts);
  const grpc::Status reloaded = Reload(narrow, &response);
  ASSERT_TRUE(reloaded.ok()) << reloaded.error_message();

  stub_.reset();
  ASSERT_EQ(server_.Stop(SIGTERM), 0);
  std::vector<std::string> flags = Flags();
  flags[0] = "--model=" + narrow;
  ASSERT_TRUE(server_.Start(flags, dir_.Sub("restarted.log")));
  stub_ = KnowledgeGraph::NewStub(
      grpc::CreateChannel(server_.target(), grpc::InsecureChannelCredentials()));
  EXPECT_EQ(Stats().relations(), 3u);
  EXPECT_THAT(server_.Log(), Not(HasSubstr("the model does not know")));
}

TEST_F(ModelReloadTest, SighupReReadsTheModelFileAndTheClientReloadsByPath) {
  ASSERT_TRUE(Start("server.log"));
  ASSERT_TRUE(AddChunks(*stub_, {DistinctFacts(20, 40, 9)}).status.ok());
  const std::string version_a = Stats().model().version();
  // Replace the --model file (as a deployment would: written aside, renamed over it).
  std::filesystem::copy_file(dir_.Sub("model_b.pt"), dir_.Sub("model.pt.new"));
  std::filesystem::rename(dir_.Sub("model.pt.new"), dir_.Sub("model.pt"));
  server_.Signal(SIGHUP);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (Stats().model().generation() < 2 && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const kg::v1::GetStatsResponse stats = Stats();
  EXPECT_EQ(stats.model().generation(), 2u);
  EXPECT_EQ(stats.model().path(), dir_.Sub("model.pt"));
  EXPECT_NE(stats.model().version(), version_a);
  EXPECT_EQ(stats.model().hops(), 3u);
  EXPECT_THAT(server_.Log(), HasSubstr("\"event\":\"model_reloaded\""));

  const std::string other = dir_.Sub("model_c.pt");
  ASSERT_TRUE(SaveUntrainedModel(other, kRelations, 10, TwoHopConfig()).ok());
  const BinaryRun run =
      RunBinary("grail-client", "--target " + server_.target() + " reload-model " + other);
  ASSERT_EQ(run.exit_code, 0) << run.all();
  EXPECT_THAT(run.out, HasSubstr("generation=3"));
  EXPECT_THAT(run.out, HasSubstr("version=" + other + "@"));
  EXPECT_THAT(run.out, HasSubstr("previous_version=" + stats.model().version()));
  EXPECT_EQ(Score({"n1", "r2", "n2"}).model_version(), Stats().model().version());
}

TEST_F(ModelReloadTest, TheModelIsWarmedUpBeforeTheServerReportsServing) {
  // An empty store: the warm-up runs on a synthetic graph of the model's relations.
  ASSERT_TRUE(Start("empty.log"));
  EXPECT_THAT(server_.Log(), HasSubstr("\"warmup_forwards\":3"));
  ASSERT_TRUE(AddChunks(*stub_, {DistinctFacts(20, 40, 11)}).status.ok());
  stub_.reset();  // no idle connection for the drain to wait for
  ASSERT_EQ(server_.Stop(SIGTERM), 0);
  std::vector<std::string> flags = Flags();
  flags.push_back("--warmup-batches=5");
  ASSERT_TRUE(server_.Start(flags, dir_.Sub("stored.log")));
  const std::string log = server_.Log();
  const size_t serving = log.find("\"event\":\"serving\"");
  ASSERT_NE(serving, std::string::npos);
  EXPECT_NE(log.find("\"warmup_forwards\":5", serving), std::string::npos) << log;
}

}  // namespace
}  // namespace grail
