// grail-tune against two real grail-server replicas serving one archive: a cycle exports the
// graph, fine-tunes, judges on the newest facts, promotes a better challenger (every replica
// reloads it while scoring calls go on, none failing) and refuses a worse one; --rollback
// serves the champion again; a reload that fails restores the champion everywhere.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/json.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.grpc.pb.h"
#include "tests/testing/graph_calls.h"
#include "tests/testing/rule_graph.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/saved_model.h"
#include "tests/testing/server_process.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

class TuneTest : public ::testing::Test {
 protected:
  void SetUp() override {
    facts_ = RuleGraphStream(60, 3, 7, "e");
    IndexedTriples indexed;
    IndexTriples(facts_, &indexed);
    ASSERT_TRUE(SaveUntrainedPathModel(model_, indexed.relations.names(), 11, /*layers=*/2).ok());
    champion_bytes_ = ReadBytes(model_);
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(servers_[i].Start(
          {"--model=" + model_, "--data-dir=" + dir_.Sub("store" + std::to_string(i))},
          dir_.Sub("server" + std::to_string(i) + ".log")));
      stubs_[i] = kg::v1::KnowledgeGraph::NewStub(
          grpc::CreateChannel(servers_[i].target(), grpc::InsecureChannelCredentials()));
    }
    // The graph lives on the first; the second only serves the model.
    std::vector<std::vector<NamedTriple>> chunks;
    for (size_t i = 0; i < facts_.size(); i += 100) {
      chunks.emplace_back(facts_.begin() + i, facts_.begin() + std::min(facts_.size(), i + 100));
    }
    ASSERT_TRUE(AddChunks(*stubs_[0], chunks).status.ok());
    ASSERT_TRUE(AddChunks(*stubs_[1], {{facts_[0]}}).status.ok());
  }

  std::string Version(int i) {
    grpc::ClientContext context;
    kg::v1::GetStatsResponse stats;
    EXPECT_TRUE(stubs_[i]->GetStats(&context, kg::v1::GetStatsRequest(), &stats).ok());
    return stats.model().version();
  }

  // grail-tune against the first replica, reloading both, with a small recipe.
  BinaryRun Tune(const std::string& flags) {
    return RunBinary(
        "grail-tune",
        absl::StrCat("--target ", servers_[0].target(), " --reload-target ", servers_[0].target(),
                     ",", servers_[1].target(), " --work-dir ", dir_.Sub("work"),
                     " --judge-facts 30 --valid-facts 20 --threads 1 ", flags));
  }

  static Json Report(const BinaryRun& run) {
    const Json report = Json::parse(run.out, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(report.is_discarded()) << run.out << run.err;
    return report;
  }

  ScopedTempDir dir_;
  const std::string model_ = dir_.Sub("model.pt");
  std::string champion_bytes_;
  std::vector<NamedTriple> facts_;
  ServerProcess servers_[2];
  std::unique_ptr<kg::v1::KnowledgeGraph::Stub> stubs_[2];
};

TEST_F(TuneTest, PromotesABetterModelEverywhereRefusesAWorseOneAndRollsBack) {
  const std::string champion = Version(0);
  ASSERT_EQ(Version(1), champion);

  // Scoring calls on both replicas all through the cycle and its reloads.
  std::atomic<bool> stop{false};
  std::atomic<int> scored{0}, failed{0};
  std::thread caller([&] {
    for (int i = 0; !stop.load(); ++i) {
      grpc::ClientContext context;
      kg::v1::ScoreTripletRequest request;
      *request.mutable_triple() = ToProto(facts_[0]);
      kg::v1::ScoreTripletResponse response;
      const grpc::Status status = stubs_[i % 2]->ScoreTriplet(&context, request, &response);
      (status.ok() ? scored : failed).fetch_add(1);
    }
  });
  const BinaryRun promoted = Tune("--epochs 4 --lr 5e-3 --report " + dir_.Sub("report.json"));
  stop = true;
  caller.join();
  ASSERT_EQ(promoted.exit_code, 0) << promoted.err << promoted.out;
  const Json report = Report(promoted);
  EXPECT_EQ(report["decision"], "promoted") << promoted.out;
  EXPECT_EQ(report["export"]["facts"], facts_.size());
  EXPECT_GT(report["judge"]["challenger"]["mrr"].get<double>(),
            report["judge"]["champion"]["mrr"].get<double>() + 0.01);
  EXPECT_EQ(Json::parse(ReadBytes(dir_.Sub("report.json"))), report);
  // Both replicas serve the challenger, which is now the archive; the champion kept beside.
  const std::string challenger = Version(0);
  EXPECT_NE(challenger, champion);
  EXPECT_EQ(Version(1), challenger);
  ASSERT_EQ(report["reloaded"].size(), 2u);
  EXPECT_EQ(report["reloaded"][1]["version"], challenger);
  EXPECT_EQ(ReadBytes(model_ + ".previous"), champion_bytes_);
  EXPECT_EQ(ReadBytes(model_), ReadBytes(dir_.Sub("work/challenger.pt")));
  EXPECT_GT(scored.load(), 0);
  EXPECT_EQ(failed.load(), 0);

  // A challenger made worse on purpose (a learning rate that wrecks it) is refused.
  const std::string promoted_bytes = ReadBytes(model_);
  const BinaryRun refused = Tune("--epochs 1 --lr 1000");
  ASSERT_EQ(refused.exit_code, 0) << refused.err << refused.out;
  EXPECT_EQ(Report(refused)["decision"], "kept") << refused.out;
  EXPECT_EQ(Version(0), challenger);
  EXPECT_EQ(Version(1), challenger);
  EXPECT_EQ(ReadBytes(model_), promoted_bytes);

  // --rollback serves the champion again, everywhere.
  const BinaryRun rolled = RunBinary(
      "grail-tune", absl::StrCat("--rollback --target ", servers_[0].target(), " --reload-target ",
                                 servers_[0].target(), ",", servers_[1].target()));
  ASSERT_EQ(rolled.exit_code, 0) << rolled.err << rolled.out;
  EXPECT_EQ(Report(rolled)["decision"], "rolled_back");
  EXPECT_EQ(Version(0), champion);
  EXPECT_EQ(Version(1), champion);
  EXPECT_EQ(ReadBytes(model_), champion_bytes_);
  EXPECT_EQ(ReadBytes(model_ + ".rolled-back"), promoted_bytes);
}

TEST_F(TuneTest, AReloadThatFailsPutsTheChampionBackEverywhereAndExitsNonZero) {
  const std::string champion = Version(0);
  // The second replica is gone: its reload fails after the first one's succeeded.
  servers_[1].Stop();
  const BinaryRun run = Tune("--epochs 4 --lr 5e-3 --deadline-ms 5000 --reload-deadline-ms 5000");
  EXPECT_EQ(run.exit_code, 1) << run.err << run.out;
  const Json report = Report(run);
  EXPECT_EQ(report["decision"], "failed");
  EXPECT_THAT(report["error"]["message"].get<std::string>(), HasSubstr("holds the model it held"));
  EXPECT_EQ(report["restored"], true);
  EXPECT_EQ(Version(0), champion);
  EXPECT_EQ(ReadBytes(model_), champion_bytes_);
}

TEST_F(TuneTest, TooFewFactsOrABadFlagChangeNothing) {
  const std::string champion = Version(0);
  const BinaryRun few = Tune("--epochs 1 --judge-facts 0");
  EXPECT_EQ(few.exit_code, 1) << few.err;
  EXPECT_EQ(Report(few)["error"]["code"], "FAILED_PRECONDITION");
  EXPECT_EQ(RunBinary("grail-tune", "--target " + servers_[0].target()).exit_code, 2);  // no dir
  EXPECT_EQ(Tune("--margin 2").exit_code, 2);
  EXPECT_EQ(Version(0), champion);
  EXPECT_EQ(ReadBytes(model_), champion_bytes_);
  EXPECT_FALSE(std::filesystem::exists(model_ + ".previous"));
}

}  // namespace
}  // namespace grail
