// The gRPC service in-process, over real gRPC on a loopback port (so that ThreadSanitizer
// watches the handlers): on a store whose disk the test can fill (a fault-injecting RocksDB
// file system, which the server binary cannot be given), what AddTriples says when the disk
// fills, that reads go on, and that writes resume once space is freed; and exports read while
// writers commit.
#include "server/rpc/graph_service.h"

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "model/grail/grail_model.h"
#include "server/engine/inference_engine.h"
#include "server/scoring/link_predictor.h"
#include "server/scoring/served_model.h"
#include "store/triple_store.h"
#include "tests/testing/full_disk.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

// rpc and the metrics know scorers only through kScorers and ScorerName: each scorer has the
// API value named after it, and every API value is a scorer's.
TEST(ScoredByTest, EveryScorerHasTheApiValueNamedAfterItAndEveryValueIsAScorers) {
  std::set<int> values;
  for (ScoredBy scorer : kScorers) {
    const kg::v1::ScoredBy value = ScoredByToProto(scorer);
    EXPECT_EQ(kg::v1::ScoredBy_Name(value),
              absl::StrCat("SCORED_BY_", absl::AsciiStrToUpper(ScorerName(scorer))));
    EXPECT_TRUE(values.insert(value).second) << ScorerName(scorer);
  }
  EXPECT_EQ(values.count(kg::v1::SCORED_BY_UNSPECIFIED), 0u);
  EXPECT_EQ(static_cast<int>(values.size()),
            kg::v1::ScoredBy_descriptor()->value_count() - 1);  // all but UNSPECIFIED
}

using ::testing::HasSubstr;

const std::vector<std::string> kRelations = {"r0", "r1"};

class InProcessServiceTest : public ::testing::Test {
 protected:
  // The service on a store in this test's directory; on `disk` when given.
  void Start(std::shared_ptr<FullDiskFileSystem> disk) {
    absl::StatusOr<std::unique_ptr<GrailModel>> created =
        GrailModel::Create(GrailConfig(), kRelations, /*seed=*/3);
    ASSERT_TRUE(created.ok()) << created.status();
    model_ = *std::move(created);
    StoreOptions options;
    options.file_system = std::move(disk);
    options.log = [](absl::string_view, absl::string_view) {};
    absl::StatusOr<std::unique_ptr<TripleStore>> store =
        TripleStore::Open(dir_.Sub("store"), options);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = *std::move(store);
    engine_ = std::make_unique<InferenceEngine>(EngineOptions(), nullptr);
    predictor_ = std::make_unique<LinkPredictor>(
        std::make_shared<const ServedModel>(
            std::shared_ptr<const GrailModel>(std::shared_ptr<void>(), model_.get()), "test.pt",
            "0123456789abcdef", 1),
        *store_, *engine_, RankLimits());
    service_ = std::make_unique<KnowledgeGraphService>(ServiceLimits(), nullptr);
    service_->Activate(predictor_.get(), nullptr, ServedModelInfo{"test"}, 16);
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(service_.get());
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = kg::v1::KnowledgeGraph::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
    engine_.reset();
  }

  kg::v1::GetStatsResponse Stats() {
    grpc::ClientContext context;
    kg::v1::GetStatsResponse stats;
    EXPECT_TRUE(stub_->GetStats(&context, kg::v1::GetStatsRequest(), &stats).ok());
    return stats;
  }

  ScopedTempDir dir_;
  std::unique_ptr<GrailModel> model_;
  std::unique_ptr<TripleStore> store_;
  std::unique_ptr<InferenceEngine> engine_;
  std::unique_ptr<LinkPredictor> predictor_;
  std::unique_ptr<KnowledgeGraphService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<kg::v1::KnowledgeGraph::Stub> stub_;
};

class FullDiskServiceTest : public InProcessServiceTest {
 protected:
  void SetUp() override { Start(disk_); }
  std::shared_ptr<FullDiskFileSystem> disk_ = std::make_shared<FullDiskFileSystem>();
};

TEST_F(FullDiskServiceTest, AChunkMeetingAFullDiskFailsNamingItAndWritesResumeOnceSpaceIsFreed) {
  grpc::ClientContext context;
  auto stream = stub_->AddTriples(&context);
  kg::v1::AddTriplesRequest first;
  *first.add_triples() = ToProto({"a", "r0", "b"});
  kg::v1::AddTriplesAck ack;
  ASSERT_TRUE(stream->Write(first));
  ASSERT_TRUE(stream->Read(&ack));
  EXPECT_EQ(ack.sequence(), 1u);

  disk_->SetFull(true);
  kg::v1::AddTriplesRequest second;
  *second.add_triples() = ToProto({"b", "r1", "c"});
  stream->Write(second);
  EXPECT_FALSE(stream->Read(&ack));
  const grpc::Status status = stream->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  // The chunk, why, and what is stored: the same context a rejected line gets.
  EXPECT_THAT(status.error_message(), HasSubstr("chunk 1: "));
  EXPECT_THAT(status.error_message(), HasSubstr("No space left on device"));
  EXPECT_THAT(status.error_message(), HasSubstr("the 1 chunks acknowledged before it are"));

  // Reads go on; a new stream is refused the same way while the disk stays full.
  grpc::ClientContext score_context;
  kg::v1::ScoreTripletRequest score;
  *score.mutable_triple() = ToProto({"a", "r0", "b"});
  kg::v1::ScoreTripletResponse scored;
  ASSERT_TRUE(stub_->ScoreTriplet(&score_context, score, &scored).ok());
  EXPECT_TRUE(scored.known_fact());
  EXPECT_EQ(Stats().graph_sequence(), 1u);
  EXPECT_EQ(AddChunks(*stub_, {{{"b", "r1", "c"}}}).status.error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);

  disk_->SetFull(false);
  const AddOutcome resumed = AddChunks(*stub_, {{{"b", "r1", "c"}}});
  ASSERT_TRUE(resumed.status.ok()) << resumed.status.error_message();
  ASSERT_EQ(resumed.acks.size(), 1u);
  EXPECT_EQ(resumed.acks[0].sequence(), 2u);
  EXPECT_EQ(Stats().facts(), 2u);
}

class ExportServiceTest : public InProcessServiceTest {
 protected:
  void SetUp() override { Start(nullptr); }
};

// Exports a page of one fact at a time while writers commit, several at once: each export gives
// exactly the facts of the version it names, and every one ends OK.
TEST_F(ExportServiceTest, ConcurrentExportsEachGiveTheVersionTheyNameWhileWritersCommit) {
  std::vector<std::vector<NamedTriple>> chunks;
  for (int c = 0; c < 20; ++c) {
    std::vector<NamedTriple> chunk;
    for (int i = 0; i < 10; ++i) {
      chunk.push_back({absl::StrCat("e", c, "_", i), kRelations[i % 2], absl::StrCat("e", c)});
    }
    chunks.push_back(std::move(chunk));
  }
  ASSERT_TRUE(AddChunks(*stub_, {chunks[0]}).status.ok());
  std::thread writer([&] {
    for (size_t c = 1; c < chunks.size(); ++c) {
      EXPECT_TRUE(AddChunks(*stub_, {chunks[c]}).status.ok());
    }
  });
  std::vector<std::thread> readers;
  std::vector<std::pair<uint64_t, size_t>> seen(4);  // (version, facts)
  for (size_t r = 0; r < seen.size(); ++r) {
    readers.emplace_back([&, r] {
      grpc::ClientContext context;
      kg::v1::ExportTriplesRequest request;
      request.set_max_page_facts(1);
      auto reader = stub_->ExportTriples(&context, request);
      kg::v1::ExportTriplesResponse page;
      while (reader->Read(&page)) {
        seen[r].first = page.graph_sequence();
        seen[r].second += page.triples_size();
      }
      const grpc::Status status = reader->Finish();
      EXPECT_TRUE(status.ok()) << status.error_message();
    });
  }
  for (std::thread& t : readers) t.join();
  writer.join();
  for (const auto& [version, facts] : seen) {
    ASSERT_GE(version, 1u);
    EXPECT_EQ(facts, 10 * version);  // chunk k is sequence k + 1, ten new facts each
  }
  EXPECT_EQ(Stats().graph_sequence(), chunks.size());
}

}  // namespace
}  // namespace grail
