// grail-tools bulk-load against a real store and the real grail-server: refused while a
// server holds the store, a bad line named before anything is loaded, and a loaded store
// served like a streamed one (its facts ranked and exported with their sequences).
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/triple_export.h"
#include "common/json.h"
#include "gmock/gmock.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/ring_graph.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/served_archive.h"

namespace grail {
namespace {

using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

const std::vector<std::string> kRelations = {"r0", "r1", "r2"};

class BulkLoadServingTest : public ServedArchiveFixture {
 protected:
  void SetUp() override {
    ASSERT_TRUE(SaveUntrainedPathModel(dir_.Sub("path.pt"), kRelations, 4, /*layers=*/2).ok());
  }

  BinaryRun BulkLoad(const std::string& files, const std::string& flags = "") {
    return RunBinary("grail-tools", absl::StrCat("bulk-load --triples=", files,
                                                 " --data-dir=", dir_.Sub("store"), " ", flags));
  }

  kg::v1::GetStatsResponse Stats() {
    grpc::ClientContext context;
    kg::v1::GetStatsResponse stats;
    EXPECT_TRUE(stub_->GetStats(&context, kg::v1::GetStatsRequest(), &stats).ok());
    return stats;
  }
};

TEST_F(BulkLoadServingTest, ALoadIsRefusedWhileServedAndServedOnceTheServerStartsOnIt) {
  const std::vector<NamedTriple> ring = RingFacts(30, kRelations, "b");
  const std::string file = dir_.Sub("ring.tsv");
  ASSERT_TRUE(WriteTripleFile(file, ring).ok());

  StartServer(dir_.Sub("path.pt"));
  Add({{"c0", "r0", "c1"}, {"c1", "r1", "b0"}});  // sequence 1
  const BinaryRun refused = BulkLoad(file);
  EXPECT_EQ(refused.exit_code, 1) << refused.all();
  EXPECT_THAT(refused.err, HasSubstr("is in use (a grail-server serving it?)"));
  EXPECT_EQ(Stats().facts(), 2u);  // the running server's store is untouched

  EXPECT_EQ(server_.Stop(), 0);
  // A bad line is named, and nothing of the load is written.
  const std::string bad = dir_.Sub("bad.tsv");
  {
    std::ofstream out(bad);
    out << "x\tr0\ty\n\nx\tr1\n";
  }
  const BinaryRun rejected = BulkLoad(absl::StrCat(file, ",", bad));
  EXPECT_EQ(rejected.exit_code, 1) << rejected.all();
  EXPECT_THAT(rejected.err, HasSubstr(absl::StrCat(bad, ":3: expected 3 tab-separated")));
  EXPECT_THAT(rejected.err, HasSubstr("Nothing was loaded"));

  const BinaryRun loaded = BulkLoad(file, "--chunk-lines=25 --check");
  ASSERT_EQ(loaded.exit_code, 0) << loaded.all();
  const Json report = Json::parse(loaded.out);
  EXPECT_EQ(report["lines"], ring.size());
  EXPECT_EQ(report["facts_added"], ring.size());
  EXPECT_EQ(report["first_sequence"], 2);
  EXPECT_EQ(report["last_sequence"], 1 + (ring.size() + 24) / 25);

  StartServer(dir_.Sub("path.pt"));
  const kg::v1::GetStatsResponse stats = Stats();
  EXPECT_EQ(stats.facts(), 2 + ring.size());
  EXPECT_EQ(stats.graph_sequence(), report["last_sequence"].get<uint64_t>());
  // b0 was named by the first chunk: the load kept its id, and ranks over every entity.
  kg::v1::RankResponse ranked;
  kg::v1::RankOptions options;
  options.set_top_k(100);
  ASSERT_TRUE(RankCall(*stub_, /*tails=*/true, "b0", "r0", options, &ranked).ok());
  EXPECT_GT(ranked.ranked_size(), 0);
  EXPECT_GE(ranked.candidates_scored() + ranked.candidates_filtered(), stats.entities() - 1);
  // Exported with the sequences its chunks took, after the streamed chunk's facts.
  std::vector<NamedTriple> exported;
  std::vector<uint64_t> sequences;
  absl::StatusOr<ExportSummary> summary =
      ExportTriples(*stub_, ExportOptions(), [&](const kg::v1::ExportTriplesResponse& page) {
        for (int i = 0; i < page.triples_size(); ++i) {
          exported.push_back(
              {page.triples(i).head(), page.triples(i).relation(), page.triples(i).tail()});
          sequences.push_back(page.sequences(i));
        }
        return absl::OkStatus();
      });
  ASSERT_TRUE(summary.ok()) << summary.status();
  std::vector<NamedTriple> expected = {{"c0", "r0", "c1"}, {"c1", "r1", "b0"}};
  expected.insert(expected.end(), ring.begin(), ring.end());
  EXPECT_THAT(exported, UnorderedElementsAreArray(expected));
  ASSERT_EQ(sequences.size(), expected.size());
  EXPECT_EQ(sequences[0], 1u);
  EXPECT_EQ(sequences[2], 2u);
  EXPECT_EQ(sequences.back(), report["last_sequence"].get<uint64_t>());
}

}  // namespace
}  // namespace grail
