// Replicas of one graph through NATS JetStream, end to end: real nats-server processes on
// loopback (one node, or a 3-node cluster with the stream kept in 3 copies), real
// grail-server replicas with their own RocksDB directories, real gRPC. Writes go to any
// replica and are read on another with min_graph_sequence; replicas killed with SIGKILL
// mid-stream resume exactly where they were; a new replica catches up from the stream, or
// from a checkpoint once the stream is trimmed; a NATS node dies and writes go on.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/nats_process.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/server_process.h"
#include "tests/testing/small_ultra.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using kg::v1::KnowledgeGraph;
using ::testing::AllOf;
using ::testing::HasSubstr;

const std::vector<std::string> kRelations = {"r0", "r1", "r2", "r3"};

// The facts of chunk `i` of a workload over `entities` entities: two that stay (no self-loops).
std::vector<NamedTriple> LastingFacts(int i, int entities = 40) {
  const int h1 = i % entities, t1 = (h1 + 1 + (i * 7) % (entities - 1)) % entities;
  const int h2 = (i * 11 + 5) % entities, t2 = (h2 + 1 + (i * 13) % (entities - 1)) % entities;
  return {{absl::StrCat("n", h1), kRelations[i % 4], absl::StrCat("n", t1)},
          {absl::StrCat("n", h2), kRelations[(i + 1) % 4], absl::StrCat("n", t2)}};
}
// A fact that chunk 2i adds and chunk 2i+1 removes: a replica applying chunk 2i twice (after
// 2i+1) would keep it; one skipping a chunk would miss a lasting fact.
NamedTriple ToggledFact(int i) { return {absl::StrCat("t", i), "r0", absl::StrCat("n", i % 40)}; }

struct Replica {
  std::string name;
  std::string data_dir;
  ServerProcess process;
  std::unique_ptr<KnowledgeGraph::Stub> stub;
};

class ReplicationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(
        SaveUntrainedModel(dir_.Sub("model.pt"), kRelations, /*seed=*/3, TwoHopConfig()).ok());
  }

  std::vector<std::string> ReplicaFlags(const std::string& name, const std::string& data_dir,
                                        const std::vector<std::string>& extra) const {
    std::vector<std::string> flags = {"--model=" + dir_.Sub("model.pt"), "--data-dir=" + data_dir,
                                      "--nats-url=" + nats_.urls(),      "--nats-stream=graph",
                                      "--replica-name=" + name,          "--warmup-batches=0"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    return flags;
  }

  // Starts (or restarts) replica `name` on `data_dir` (default: its own directory).
  Replica& StartReplica(const std::string& name, const std::vector<std::string>& extra = {},
                        std::string data_dir = "") {
    std::unique_ptr<Replica>& slot = replicas_[name];
    if (slot == nullptr) slot = std::make_unique<Replica>();
    Replica& r = *slot;
    r.name = name;
    r.data_dir = data_dir.empty() ? dir_.Sub("store-" + name) : data_dir;
    EXPECT_TRUE(r.process.Start(ReplicaFlags(name, r.data_dir, extra),
                                dir_.Sub(absl::StrCat(name, "-", ++starts_, ".log"))));
    r.stub = KnowledgeGraph::NewStub(
        grpc::CreateChannel(r.process.target(), grpc::InsecureChannelCredentials()));
    return r;
  }

  // One chunk through its own AddTriples stream; returns its ack's sequence (0 on failure).
  static uint64_t Add(Replica& r, const std::vector<NamedTriple>& chunk) {
    const AddOutcome outcome = AddChunks(*r.stub, {chunk});
    EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    return outcome.acks.size() == 1 ? outcome.acks[0].sequence() : 0;
  }
  static uint64_t Remove(Replica& r, const std::vector<NamedTriple>& chunk) {
    const RemoveOutcome outcome = RemoveChunks(*r.stub, {chunk});
    EXPECT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    return outcome.acks.size() == 1 ? outcome.acks[0].sequence() : 0;
  }

  static grpc::Status Stats(Replica& r, uint64_t min_sequence, kg::v1::GetStatsResponse* stats,
                            std::chrono::milliseconds deadline = std::chrono::seconds(30)) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    kg::v1::GetStatsRequest request;
    request.set_min_graph_sequence(min_sequence);
    return r.stub->GetStats(&context, request, stats);
  }
  // Scores `facts` on `r` at `min_sequence` or later.
  static kg::v1::ScoreTripletsResponse Scores(Replica& r, const std::vector<NamedTriple>& facts,
                                              uint64_t min_sequence) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    kg::v1::ScoreTripletsRequest request;
    for (const NamedTriple& t : facts) *request.add_triples() = ToProto(t);
    request.set_min_graph_sequence(min_sequence);
    kg::v1::ScoreTripletsResponse response;
    const grpc::Status status = r.stub->ScoreTriplets(&context, request, &response);
    EXPECT_TRUE(status.ok()) << r.name << ": " << status.error_message();
    return response;
  }

  // Runs the add/remove workload's chunks [from, to) on `r`; returns the last ack's sequence.
  static uint64_t RunWorkload(Replica& r, int from, int to) {
    uint64_t last = 0;
    for (int i = from; i < to; ++i) {
      std::vector<NamedTriple> chunk = LastingFacts(i);
      chunk.push_back(ToggledFact(i));
      last = Add(r, chunk);
      if (last == 0) return 0;
      last = Remove(r, {ToggledFact(i)});
      if (last == 0) return 0;
    }
    return last;
  }
  // Every fact the workload's chunks [0, n) touch: the lasting ones and the toggled ones.
  static std::vector<NamedTriple> WorkloadFacts(int n) {
    std::vector<NamedTriple> facts;
    for (int i = 0; i < n; ++i) {
      for (const NamedTriple& t : LastingFacts(i)) facts.push_back(t);
      facts.push_back(ToggledFact(i));
    }
    return facts;
  }

  // Expects `b` to hold exactly `a`'s graph at `sequence`: same counts, same stored facts
  // among `facts` (the lasting ones stored, the toggled ones not), same scores.
  void ExpectSameGraph(Replica& a, Replica& b, uint64_t sequence, int chunks) {
    kg::v1::GetStatsResponse stats_a, stats_b;
    ASSERT_TRUE(Stats(a, sequence, &stats_a).ok());
    const grpc::Status read_b = Stats(b, sequence, &stats_b);
    ASSERT_TRUE(read_b.ok()) << read_b.error_message();
    EXPECT_EQ(stats_b.graph_sequence(), stats_a.graph_sequence());
    EXPECT_EQ(stats_b.graph_sequence(), sequence);
    EXPECT_EQ(stats_b.facts(), stats_a.facts());
    EXPECT_EQ(stats_b.entities(), stats_a.entities());
    const std::vector<NamedTriple> facts = WorkloadFacts(chunks);
    const kg::v1::ScoreTripletsResponse scores_a = Scores(a, facts, sequence);
    const kg::v1::ScoreTripletsResponse scores_b = Scores(b, facts, sequence);
    ASSERT_EQ(scores_a.results_size(), static_cast<int>(facts.size()));
    ASSERT_EQ(scores_b.results_size(), static_cast<int>(facts.size()));
    for (size_t i = 0; i < facts.size(); ++i) {
      const bool toggled = facts[i].head[0] == 't';
      EXPECT_EQ(scores_a.results(i).known_fact(), !toggled) << facts[i].head;
      EXPECT_EQ(scores_b.results(i).known_fact(), !toggled) << b.name << " " << facts[i].head;
      EXPECT_NEAR(scores_b.results(i).score(), scores_a.results(i).score(),
                  1e-5 * std::max(1.0f, std::abs(scores_a.results(i).score())));
    }
  }

  ScopedTempDir dir_;
  NatsCluster nats_;
  std::map<std::string, std::unique_ptr<Replica>> replicas_;
  int starts_ = 0;
};

TEST_F(ReplicationTest, AWriteOnOneReplicaIsReadOnAnotherWithMinGraphSequence) {
  ASSERT_TRUE(nats_.Start(dir_.path(), 1));
  Replica& a = StartReplica("a");
  Replica& b = StartReplica("b");
  // Written on a: the ack's sequence is the stream's, and b serves it once asked to.
  const uint64_t first = RunWorkload(a, 0, 1);  // an add, then a remove
  EXPECT_EQ(first, 2u);
  const uint64_t on_a = RunWorkload(a, 1, 6);
  ASSERT_GT(on_a, first);
  // An ack means applied on the replica that gave it: visible there without waiting.
  kg::v1::GetStatsResponse own;
  ASSERT_TRUE(Stats(a, 0, &own).ok());
  EXPECT_EQ(own.graph_sequence(), on_a);
  ExpectSameGraph(a, b, on_a, 6);
  // And the other way round: written on b, read on a.
  const uint64_t on_b = RunWorkload(b, 6, 10);
  ASSERT_EQ(on_b, on_a + 8);  // one stream: b's chunks follow a's
  ExpectSameGraph(b, a, on_b, 10);

  // A replica asked for a version nobody wrote waits out its deadline, then says how far
  // behind it is.
  kg::v1::GetStatsResponse stats;
  const grpc::Status behind = Stats(b, on_b + 5, &stats, std::chrono::milliseconds(300));
  EXPECT_EQ(behind.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(behind.error_message(),
              AllOf(HasSubstr(absl::StrCat("up to sequence ", on_b)), HasSubstr("5 behind")));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(300));
  kg::v1::ScoreTripletRequest request;
  *request.mutable_triple() = ToProto(LastingFacts(0)[0]);
  request.set_min_graph_sequence(on_b + 1);
  kg::v1::ScoreTripletResponse response;
  EXPECT_EQ(b.stub->ScoreTriplet(&context, request, &response).error_code(),
            grpc::StatusCode::UNAVAILABLE);

  // A relation removed by name on b leaves both replicas at the same version.
  grpc::ClientContext removal;
  auto stream = b.stub->RemoveTriples(&removal);
  kg::v1::RemoveTriplesRequest chunk;
  chunk.add_relations("r3");
  kg::v1::RemoveTriplesAck ack;
  ASSERT_TRUE(stream->Write(chunk) && stream->Read(&ack));
  stream->WritesDone();
  ASSERT_TRUE(stream->Finish().ok());
  EXPECT_EQ(ack.relations_removed(), 1u);
  kg::v1::GetStatsResponse stats_a, stats_b;
  ASSERT_TRUE(Stats(a, ack.sequence(), &stats_a).ok());
  ASSERT_TRUE(Stats(b, ack.sequence(), &stats_b).ok());
  EXPECT_EQ(stats_a.relations(), 3u);
  EXPECT_EQ(stats_b.relations(), 3u);
  EXPECT_EQ(stats_a.facts(), stats_b.facts());
}

TEST_F(ReplicationTest, AChunkRejectedByValidationIsNeitherLoggedNorApplied) {
  ASSERT_TRUE(nats_.Start(dir_.path(), 1));
  Replica& a = StartReplica("a");
  Replica& b = StartReplica("b");
  const uint64_t stored = Add(a, LastingFacts(0));
  // A relation outside the model's vocabulary: refused before it reaches the stream.
  const AddOutcome refused = AddChunks(*a.stub, {{{"x", "r0", "y"}, {"x", "unknown", "y"}}});
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.status.error_message(), HasSubstr("line 2"));
  const uint64_t next = Add(b, LastingFacts(1));
  EXPECT_EQ(next, stored + 1);  // nothing was logged in between
  kg::v1::GetStatsResponse stats;
  ASSERT_TRUE(Stats(a, next, &stats).ok());
  EXPECT_EQ(stats.facts(), 4u);
}

// The bound on relations meeting at an entity, kept while a model that reads the graph of
// relations (ULTRA) serves, is checked before a chunk is logged, as the vocabulary is: a chunk
// that would pass it is refused naming its line, and nothing of it reaches the stream or any
// replica.
TEST_F(ReplicationTest, AChunkPastTheRelationPairBoundIsNeitherLoggedNorApplied) {
  ASSERT_TRUE(SaveSmallUltra(dir_.Sub("ultra.pt"), /*seed=*/3).ok());
  const std::vector<std::string> flags = {"--model=" + dir_.Sub("ultra.pt"),
                                          "--max-relation-pairs=8"};
  ASSERT_TRUE(nats_.Start(dir_.path(), 1));
  Replica& a = StartReplica("a", flags);
  Replica& b = StartReplica("b", flags);
  const uint64_t stored = Add(a, LastingFacts(0));  // 4 pairs: each side meets itself
  // x gains r0's head side (met already), r1's (5 pairs), then r2's with y's tail side of r2:
  // 9, past 8.
  const AddOutcome refused =
      AddChunks(*a.stub, {{{"x", "r0", "n1"}, {"x", "r1", "y"}, {"x", "r2", "y"}}});
  EXPECT_EQ(refused.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_THAT(refused.status.error_message(),
              AllOf(HasSubstr("line 3"), HasSubstr("--max-relation-pairs")));
  const uint64_t next = Add(b, LastingFacts(1));
  EXPECT_EQ(next, stored + 1);  // nothing was logged in between
  for (Replica* r : {&a, &b}) {
    kg::v1::GetStatsResponse stats;
    ASSERT_TRUE(Stats(*r, next, &stats).ok());
    EXPECT_EQ(stats.facts(), 4u) << r->name;
  }
}

TEST_F(ReplicationTest, AReplicaKilledMidStreamResumesWithoutApplyingAChunkTwiceOrSkippingOne) {
  ASSERT_TRUE(nats_.Start(dir_.path(), 1));
  Replica& a = StartReplica("a");
  Replica& b = StartReplica("b");
  constexpr int kChunks = 60;  // 120 stream entries
  std::atomic<int> written{0};
  std::atomic<uint64_t> last{0};
  std::thread writer([&] {
    for (int i = 0; i < kChunks; ++i) {
      const uint64_t sequence = RunWorkload(a, i, i + 1);
      if (sequence == 0) return;
      last = sequence;
      written = i + 1;
    }
  });
  // Killed while a writes and b applies.
  while (written < 10) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(b.process.Stop(SIGKILL), -1);
  while (written < 25) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  StartReplica("b");  // the same store and consumer name
  // And once more, now that it is catching up.
  while (written < 40) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(replicas_["b"]->process.Stop(SIGKILL), -1);
  StartReplica("b");
  writer.join();
  ASSERT_EQ(written, kChunks);
  ExpectSameGraph(a, *replicas_["b"], last, kChunks);
}

TEST_F(ReplicationTest, ANewReplicaCatchesUpFromTheStreamBeforeItServes) {
  ASSERT_TRUE(nats_.Start(dir_.path(), 1));
  Replica& a = StartReplica("a");
  const uint64_t last = RunWorkload(a, 0, 15);
  ASSERT_GT(last, 0u);
  Replica& c = StartReplica("c");
  // Ready means caught up: no min_graph_sequence needed.
  kg::v1::GetStatsResponse stats;
  ASSERT_TRUE(Stats(c, 0, &stats).ok());
  EXPECT_EQ(stats.graph_sequence(), last);
  ExpectSameGraph(a, c, last, 15);
}

TEST_F(ReplicationTest, ANewReplicaBootstrapsFromACheckpointOnceTheStreamIsTrimmed) {
  ASSERT_TRUE(nats_.Start(dir_.path(), 1));
  // a creates the stream keeping only the last 10 chunks.
  Replica& a = StartReplica("a", {"--nats-stream-max-chunks=10"});
  const uint64_t last = RunWorkload(a, 0, 10);
  ASSERT_EQ(last, 20u);

  // From an empty store, chunks 1..10 are gone: the replica refuses to start, and says why.
  const BinaryRun refused = RunBinary(
      "grail-server",
      absl::StrCat("--host=127.0.0.1 --port=0 --metrics-port=-1 --model=", dir_.Sub("model.pt"),
                   " --data-dir=", dir_.Sub("store-c"), " --nats-url=", nats_.urls(),
                   " --nats-stream=graph --replica-name=c --warmup-batches=0"));
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_THAT(refused.all(),
              AllOf(HasSubstr("starts at sequence 11"), HasSubstr("chunks 1..10 were trimmed"),
                    HasSubstr("checkpoint")));

  // The documented procedure: a checkpoint of a live replica, copied to the new one's disk.
  grpc::ClientContext context;
  kg::v1::CreateCheckpointRequest request;
  request.set_dir(dir_.Sub("checkpoint"));
  kg::v1::CreateCheckpointResponse response;
  const grpc::Status made = a.stub->CreateCheckpoint(&context, request, &response);
  ASSERT_TRUE(made.ok()) << made.error_message();
  EXPECT_EQ(response.graph_sequence(), last);
  // Written after the checkpoint, and still in the stream (entries 15..24).
  const uint64_t later = RunWorkload(a, 10, 12);
  // The refused start left an empty store behind: the checkpoint replaces it.
  std::filesystem::remove_all(dir_.Sub("store-c"));
  std::filesystem::copy(dir_.Sub("checkpoint"), dir_.Sub("store-c"),
                        std::filesystem::copy_options::recursive);
  Replica& c = StartReplica("c");
  ExpectSameGraph(a, c, later, 12);

  // A checkpoint goes into a new directory only.
  grpc::ClientContext again;
  EXPECT_EQ(a.stub->CreateCheckpoint(&again, request, &response).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
}

TEST_F(ReplicationTest, AReplicaLeftBehindATrimmedStreamStopsApplyingRatherThanSkipChunks) {
  ASSERT_TRUE(nats_.Start(dir_.path(), 1));
  Replica& a = StartReplica("a", {"--nats-stream-max-chunks=10"});
  Replica& b = StartReplica("b");
  const uint64_t seen = RunWorkload(a, 0, 2);
  kg::v1::GetStatsResponse stats;
  ASSERT_TRUE(Stats(b, seen, &stats).ok());
  // b sleeps while the stream moves on past what it holds.
  b.process.Signal(SIGSTOP);
  const uint64_t last = RunWorkload(a, 2, 12);
  ASSERT_EQ(last, seen + 20);
  b.process.Signal(SIGCONT);
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (b.process.Log().find("replication_stalled") == std::string::npos &&
         std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // It still serves the graph it has (SIGSTOP lands a moment after kill() returns, so b
  // may have applied a little past `seen`), names what it misses, and says it is behind.
  ASSERT_TRUE(Stats(b, 0, &stats).ok());
  const uint64_t held = stats.graph_sequence();
  EXPECT_GE(held, seen);
  EXPECT_LT(held, last);
  EXPECT_THAT(b.process.Log(), AllOf(HasSubstr("replication_stalled"),
                                     HasSubstr(absl::StrCat("chunks ", held + 1, ".."))));
  const grpc::Status behind = Stats(b, last, &stats, std::chrono::milliseconds(300));
  EXPECT_EQ(behind.error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(ReplicationTest, WritesGoOnWhenOneNodeOfAThreeNodeClusterDiesAndNoAckedWriteIsLost) {
  ASSERT_TRUE(nats_.Start(dir_.path(), 3));
  Replica& a = StartReplica("a", {"--nats-stream-replicas=3"});
  Replica& b = StartReplica("b");
  const uint64_t before = RunWorkload(a, 0, 8);
  ASSERT_GT(before, 0u);
  nats_.node(0).Kill();
  // Every later chunk is acknowledged (publishes retried through the failover), on either
  // replica, and every acknowledged one is on both.
  const uint64_t on_a = RunWorkload(a, 8, 14);
  ASSERT_GT(on_a, before);
  const uint64_t on_b = RunWorkload(b, 14, 20);
  ASSERT_GT(on_b, on_a);
  ExpectSameGraph(a, b, on_b, 20);
}

}  // namespace
}  // namespace grail
