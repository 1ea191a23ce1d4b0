#include "client/triple_upload.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/fake_knowledge_graph.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;

TripleChunkReader ReaderOf(const std::string& text, size_t chunk_size) {
  return TripleChunkReader("facts.tsv", std::make_unique<std::istringstream>(text), chunk_size);
}

// Lines "e<i>\tlikes\te<i+1>" for i in [from, to].
std::string Facts(int from, int to) {
  std::string text;
  for (int i = from; i <= to; ++i) {
    text += "e" + std::to_string(i) + "\tlikes\te" + std::to_string(i + 1) + "\n";
  }
  return text;
}

std::vector<uint64_t> FirstLines(const FakeKnowledgeGraph& service) {
  std::vector<uint64_t> lines;
  for (const auto& chunk : service.received_chunks()) lines.push_back(chunk.first_line);
  return lines;
}

TEST(UploadTriplesTest, EachChunkCarriesItsFirstLineAndEveryAckIsCounted) {
  FakeKnowledgeGraph service;
  FakeServer server(&service);
  auto stub = server.NewStub();
  // 2500 facts, with a blank line before the last 500 (lines 2001 and 2002-2501).
  TripleChunkReader reader = ReaderOf(Facts(1, 2000) + "\n" + Facts(2001, 2500), 1000);
  std::vector<uint64_t> acknowledged;
  UploadOptions options;
  options.on_ack = [&](const UploadReport& r) { acknowledged.push_back(r.chunks_acknowledged); };
  const UploadReport report = UploadTriples(stub.get(), &reader, options);

  ASSERT_TRUE(report.ok()) << report.status.error_message() << report.source_error;
  EXPECT_THAT(FirstLines(service), ElementsAre(1, 1001, 2002));
  EXPECT_THAT(acknowledged, ElementsAre(1, 2, 3));
  EXPECT_EQ(report.chunks_sent, 3u);
  EXPECT_EQ(report.chunks_acknowledged, 3u);
  EXPECT_EQ(report.facts_acknowledged, 2500u);
  EXPECT_EQ(report.facts_added, 2500u);
  EXPECT_EQ(report.duplicate_facts, 0u);
  EXPECT_EQ(report.entities_created, 2501u);
  EXPECT_EQ(report.last_sequence, 3u);
  EXPECT_FALSE(report.first_unacknowledged.has_value());
  EXPECT_GT(report.facts_per_second(), 0);
}

TEST(UploadTriplesTest, ResendingAFileCountsDuplicates) {
  FakeKnowledgeGraph service;
  FakeServer server(&service);
  auto stub = server.NewStub();
  TripleChunkReader first = ReaderOf(Facts(1, 10), 4);
  ASSERT_TRUE(UploadTriples(stub.get(), &first, UploadOptions()).ok());
  TripleChunkReader second = ReaderOf(Facts(1, 10), 4);
  const UploadReport report = UploadTriples(stub.get(), &second, UploadOptions());
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report.facts_added, 0u);
  EXPECT_EQ(report.duplicate_facts, 10u);
  EXPECT_EQ(report.entities_created, 0u);
  EXPECT_EQ(report.last_sequence, 6u);
}

TEST(UploadTriplesTest, RejectedChunkReportsWhatIsStoredAndTheFirstUnacknowledgedLines) {
  FakeKnowledgeGraph service;
  FakeServer server(&service);
  auto stub = server.NewStub();
  // Chunks of 2: lines 1-2, 3-4, 5-6 are fine; line 8 (in chunk 3, lines 7-8) is rejected.
  TripleChunkReader reader = ReaderOf(Facts(1, 7) + "x\tbad\ty\n" + Facts(9, 12), 2);
  const UploadReport report = UploadTriples(stub.get(), &reader, UploadOptions());

  EXPECT_FALSE(report.ok());
  EXPECT_TRUE(report.source_error.ok());
  EXPECT_EQ(report.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(report.status.error_message(), HasSubstr("line 8"));
  EXPECT_EQ(report.chunks_acknowledged, 3u);
  EXPECT_EQ(report.facts_acknowledged, 6u);
  EXPECT_EQ(report.last_sequence, 3u);
  ASSERT_TRUE(report.first_unacknowledged.has_value());
  EXPECT_EQ(report.first_unacknowledged->chunk_index, 3u);
  EXPECT_EQ(report.first_unacknowledged->first_line, 7u);
  EXPECT_EQ(report.first_unacknowledged->last_line, 8u);
}

TEST(UploadTriplesTest, MalformedLineStopsTheUploadBeforeItsChunkIsSent) {
  FakeKnowledgeGraph service;
  FakeServer server(&service);
  auto stub = server.NewStub();
  // Chunks of 2: lines 1-2 and 3-4 go out; line 6 has two fields, so lines 5-6 never do.
  TripleChunkReader reader = ReaderOf(Facts(1, 5) + "x\tlikes\n" + Facts(7, 9), 2);
  const UploadReport report = UploadTriples(stub.get(), &reader, UploadOptions());

  EXPECT_FALSE(report.ok());
  EXPECT_TRUE(report.status.ok()) << report.status.error_message();
  EXPECT_EQ(report.source_error.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(report.source_error.message(), HasSubstr("facts.tsv:6:"));
  EXPECT_THAT(FirstLines(service), ElementsAre(1, 3));
  EXPECT_EQ(report.chunks_acknowledged, 2u);
  EXPECT_EQ(report.facts_acknowledged, 4u);
  EXPECT_FALSE(report.first_unacknowledged.has_value());
}

TEST(UploadTriplesTest, AtMostWindowChunksAreUnacknowledged) {
  FakeKnowledgeGraph service;
  service.set_ack_after_chunks(3);  // acknowledges in bursts of 3
  FakeServer server(&service);
  auto stub = server.NewStub();
  TripleChunkReader reader = ReaderOf(Facts(1, 20), 2);
  UploadOptions options;
  options.window = 3;
  const UploadReport report = UploadTriples(stub.get(), &reader, options);
  ASSERT_TRUE(report.ok()) << report.status.error_message();
  EXPECT_EQ(report.chunks_acknowledged, 10u);
  EXPECT_EQ(service.max_unacknowledged(), 3);
}

TEST(UploadTriplesTest, StalledAcknowledgementsFailWithDeadlineExceeded) {
  FakeKnowledgeGraph service;
  service.set_ack_after_chunks(4);  // never reached: the client stops at 3 in flight
  FakeServer server(&service);
  auto stub = server.NewStub();
  TripleChunkReader reader = ReaderOf(Facts(1, 20), 2);
  UploadOptions options;
  options.window = 3;
  options.ack_timeout_ms = 300;
  const UploadReport report = UploadTriples(stub.get(), &reader, options);
  EXPECT_EQ(report.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_EQ(report.chunks_acknowledged, 0u);
  EXPECT_EQ(service.received_chunks().size(), 3u);
  ASSERT_TRUE(report.first_unacknowledged.has_value());
  EXPECT_EQ(report.first_unacknowledged->first_line, 1u);
}

TEST(UploadTriplesTest, NoServerIsUnavailable) {
  auto stub = kg::v1::KnowledgeGraph::NewStub(
      grpc::CreateChannel("127.0.0.1:1", grpc::InsecureChannelCredentials()));
  TripleChunkReader reader = ReaderOf(Facts(1, 3), 2);
  const UploadReport report = UploadTriples(stub.get(), &reader, UploadOptions());
  EXPECT_EQ(report.status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(report.chunks_acknowledged, 0u);
}

}  // namespace
}  // namespace grail
