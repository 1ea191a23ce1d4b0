// ExportTriples against the real grail-server: the facts of one version in pages, in order of
// addition, incrementally after a sequence; an export under way sees only its version while
// writes and scoring go on; grail-client export writes a triple file the trainers read, and
// only a whole one.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/triple_export.h"
#include "gmock/gmock.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/metrics_scrape.h"
#include "tests/testing/ring_graph.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/served_archive.h"

namespace grail {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

const std::vector<std::string> kRelations = {"r0", "r1", "r2"};

struct Exported {
  absl::Status status;
  ExportSummary summary;
  std::vector<NamedTriple> facts;
  std::vector<uint64_t> sequences;
  std::vector<size_t> pages;  // facts per page
};

class ExportTest : public ServedArchiveFixture {
 protected:
  void SetUp() override {
    ASSERT_TRUE(SaveUntrainedPathModel(dir_.Sub("path.pt"), kRelations, 4, /*layers=*/2).ok());
    StartServer(dir_.Sub("path.pt"));
  }

  Exported Export(uint64_t since, uint32_t page_facts = 0) {
    ExportOptions options;
    options.since_sequence = since;
    options.page_facts = page_facts;
    Exported out;
    absl::StatusOr<ExportSummary> summary =
        ExportTriples(*stub_, options, [&](const kg::v1::ExportTriplesResponse& page) {
          out.pages.push_back(page.triples_size());
          for (int i = 0; i < page.triples_size(); ++i) {
            const kg::v1::Triple& t = page.triples(i);
            out.facts.push_back(NamedTriple{t.head(), t.relation(), t.tail()});
            out.sequences.push_back(page.sequences(i));
          }
          return absl::OkStatus();
        });
    out.status = summary.status();
    if (summary.ok()) out.summary = *summary;
    return out;
  }

  uint64_t Sequence() {
    grpc::ClientContext context;
    kg::v1::GetStatsResponse stats;
    EXPECT_TRUE(stub_->GetStats(&context, kg::v1::GetStatsRequest(), &stats).ok());
    return stats.graph_sequence();
  }
};

TEST_F(ExportTest, GivesOneVersionInPagesInOrderOfAdditionAndIncrementallyAfterASequence) {
  const std::vector<NamedTriple> ring = RingFacts(20, kRelations);
  Add(ring);                                                   // sequence 1
  Add({{"c0", "r1", "c7"}, {"c3", "r2", "c9"}});               // 2
  ASSERT_TRUE(RemoveChunks(*stub_, {{ring[4]}}).status.ok());  // 3
  std::vector<NamedTriple> expected = ring;
  expected.erase(expected.begin() + 4);
  expected.push_back({"c0", "r1", "c7"});
  expected.push_back({"c3", "r2", "c9"});

  const Exported all = Export(0, 7);
  ASSERT_TRUE(all.status.ok()) << all.status;
  EXPECT_EQ(all.summary.graph_sequence, 3u);
  EXPECT_THAT(all.facts, UnorderedElementsAreArray(expected));
  // Pages of 7; the ring's chunk first, then the second chunk's two facts, last.
  ASSERT_EQ(all.pages.size(), (expected.size() + 6) / 7);
  for (size_t i = 0; i + 1 < all.pages.size(); ++i) EXPECT_EQ(all.pages[i], 7u);
  EXPECT_EQ(all.sequences.front(), 1u);
  EXPECT_EQ(all.sequences[all.sequences.size() - 3], 1u);
  EXPECT_EQ(all.sequences[all.sequences.size() - 2], 2u);
  EXPECT_EQ(all.sequences.back(), 2u);
  EXPECT_EQ(ScrapedMetric(server_.metrics_port(), "grail_facts_exported_total"), expected.size());

  // Incremental: since the export's version, only what came after it.
  Add({{"c1", "r0", "c12"}, {"fresh", "r1", "c2"}});  // 4
  const Exported since = Export(all.summary.graph_sequence);
  ASSERT_TRUE(since.status.ok()) << since.status;
  EXPECT_EQ(since.summary.graph_sequence, 4u);
  EXPECT_THAT(since.facts, UnorderedElementsAreArray(std::vector<NamedTriple>{
                               {"c1", "r0", "c12"}, {"fresh", "r1", "c2"}}));
  EXPECT_THAT(since.sequences, ElementsAreArray({4u, 4u}));
  // Nothing after the latest version: one message, with its version and no fact.
  const Exported nothing = Export(4);
  ASSERT_TRUE(nothing.status.ok()) << nothing.status;
  EXPECT_EQ(nothing.summary.graph_sequence, 4u);
  EXPECT_THAT(nothing.pages, ElementsAreArray({0u}));

  const Exported ahead = Export(9);
  EXPECT_EQ(ahead.status.code(), absl::StatusCode::kOutOfRange) << ahead.status;
  EXPECT_THAT(std::string(ahead.status.message()), HasSubstr("at sequence 4"));
  const Exported huge_pages = Export(0, 1000000);
  EXPECT_EQ(huge_pages.status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(huge_pages.status.message()), HasSubstr("--max-chunk-facts"));
}

TEST_F(ExportTest, AnExportUnderWaySeesItsVersionWhileWritesAndScoresGoOn) {
  const std::vector<NamedTriple> ring = RingFacts(20, kRelations);
  Add(ring);
  grpc::ClientContext context;
  kg::v1::ExportTriplesRequest request;
  request.set_max_page_facts(1);
  std::unique_ptr<grpc::ClientReader<kg::v1::ExportTriplesResponse>> reader =
      stub_->ExportTriples(&context, request);
  kg::v1::ExportTriplesResponse page;
  ASSERT_TRUE(reader->Read(&page));
  const uint64_t version = page.graph_sequence();
  std::vector<NamedTriple> facts = {
      {page.triples(0).head(), page.triples(0).relation(), page.triples(0).tail()}};

  // Meanwhile: a chunk added, one removed, and a score answered.
  Add({{"c0", "r1", "c7"}});
  ASSERT_TRUE(RemoveChunks(*stub_, {{ring[0], ring[1]}}).status.ok());
  {
    grpc::ClientContext score_context;
    kg::v1::ScoreTripletRequest score;
    *score.mutable_triple() = ToProto({"c0", "r1", "c7"});
    kg::v1::ScoreTripletResponse response;
    const grpc::Status scored = stub_->ScoreTriplet(&score_context, score, &response);
    EXPECT_TRUE(scored.ok()) << scored.error_message();
    EXPECT_TRUE(response.known_fact());
  }

  while (reader->Read(&page)) {
    EXPECT_EQ(page.graph_sequence(), version);
    for (const kg::v1::Triple& t : page.triples()) {
      facts.push_back({t.head(), t.relation(), t.tail()});
    }
  }
  const grpc::Status finished = reader->Finish();
  ASSERT_TRUE(finished.ok()) << finished.error_message();
  EXPECT_THAT(facts, UnorderedElementsAreArray(ring));
}

TEST_F(ExportTest, GrailClientWritesATripleFileTheTrainersReadAndOnlyAWholeOne) {
  const std::vector<NamedTriple> ring = RingFacts(12, kRelations);
  Add(ring);
  Add({{"c2", "r2", "c8"}});
  const std::string target = "--target " + server_.target();
  const std::string file = dir_.Sub("graph.tsv");
  const BinaryRun run = RunBinary("grail-client", target + " export " + file + " --page 5");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr(absl::StrCat("graph_sequence=", Sequence(), " ")));
  EXPECT_THAT(run.out, HasSubstr(absl::StrCat("facts=", ring.size() + 1, " pages=")));
  absl::StatusOr<std::vector<NamedTriple>> read = ReadTripleFile(file);
  ASSERT_TRUE(read.ok()) << read.status();
  std::vector<NamedTriple> expected = ring;
  expected.push_back({"c2", "r2", "c8"});
  EXPECT_THAT(*read, UnorderedElementsAreArray(expected));
  EXPECT_EQ(read->back(), (NamedTriple{"c2", "r2", "c8"}));  // the newest fact last

  // Since that version: only what came after.
  Add({{"c5", "r0", "c1"}});
  const std::string since_file = dir_.Sub("since.tsv");
  const BinaryRun since = RunBinary(
      "grail-client",
      absl::StrCat(target, " --json export ", since_file, " --since-sequence ", Sequence() - 1));
  ASSERT_EQ(since.exit_code, 0) << since.err;
  EXPECT_THAT(since.out, HasSubstr("\"facts\":1"));
  read = ReadTripleFile(since_file);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_THAT(*read, ElementsAreArray(std::vector<NamedTriple>{{"c5", "r0", "c1"}}));

  // A failed export leaves no file, whole or partial, and an earlier one as it was.
  const BinaryRun failed =
      RunBinary("grail-client", absl::StrCat(target, " export ", file, " --since-sequence 999"));
  EXPECT_EQ(failed.exit_code, 1);
  EXPECT_THAT(failed.err, HasSubstr("OUT_OF_RANGE"));
  EXPECT_FALSE(std::filesystem::exists(file + ".partial"));
  read = ReadTripleFile(file);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->size(), expected.size());
  const std::string never = dir_.Sub("never.tsv");
  EXPECT_EQ(
      RunBinary("grail-client", absl::StrCat(target, " export ", never, " --since-sequence 999"))
          .exit_code,
      1);
  EXPECT_FALSE(std::filesystem::exists(never));
}

}  // namespace
}  // namespace grail
