// The grail-client binary's command-line contract: exit codes, and output formats against
// an in-process fake server.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/json.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/client_test_files.h"
#include "tests/client/fake_knowledge_graph.h"
#include "tests/testing/run_binary.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

std::vector<std::string> OutputLines(const BinaryRun& run) {
  std::vector<std::string> lines = absl::StrSplit(run.out, '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  return lines;
}

TEST(ClientUsageTest, NoCommandIsAUsageError) {
  const BinaryRun run = RunBinary("grail-client", "");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("no command"));
  EXPECT_THAT(run.err, HasSubstr("usage: grail-client"));
  EXPECT_EQ(run.out, "");
}

TEST(ClientUsageTest, UnknownCommandIsAUsageError) {
  const BinaryRun run = RunBinary("grail-client", "--target 127.0.0.1:1 frobnicate");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("unknown command 'frobnicate'"));
}

TEST(ClientUsageTest, UnknownFlagIsAUsageError) {
  const BinaryRun run = RunBinary("grail-client", "--no-such-flag=1 stats");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("Unknown command line flag 'no_such_flag'"));
}

TEST(ClientUsageTest, BadFlagValueIsAUsageError) {
  const BinaryRun run = RunBinary("grail-client", "rank-tails a likes --top-k many");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("Illegal value 'many' specified for flag 'top_k'"));
}

TEST(ClientUsageTest, WrongArgumentCountIsAUsageError) {
  const BinaryRun run = RunBinary("grail-client", "score a likes");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("score takes 3 argument(s), got 2"));
}

TEST(ClientUsageTest, HelpPrintsUsageAndSucceeds) {
  const BinaryRun run = RunBinary("grail-client", "--help");
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("rank-heads R T"));
  EXPECT_THAT(run.out, HasSubstr("--candidates_per_request"));  // and every flag
}

TEST(ClientUsageTest, ArgumentsWithOneDashArePositional) {
  // An entity may be called "-1"; flags start with two dashes, and may come after it.
  const BinaryRun run = RunBinary("grail-client", "score -1 likes b --target 127.0.0.1:1");
  EXPECT_EQ(run.exit_code, 1) << run.all();
  EXPECT_THAT(run.err, StartsWith("error: UNAVAILABLE: "));
}

TEST(ClientUsageTest, NoServerIsAnRpcErrorWithItsCodeName) {
  const BinaryRun run = RunBinary("grail-client", "--target 127.0.0.1:1 stats");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, StartsWith("error: UNAVAILABLE: "));
}

class ClientCommandTest : public ::testing::Test {
 protected:
  BinaryRun Client(const std::string& args) {
    return RunBinary("grail-client", "--target " + server_.target() + " " + args);
  }

  FakeKnowledgeGraph service_;
  FakeServer server_{&service_};
};

TEST_F(ClientCommandTest, ScorePrintsTheScoreAlone) {
  const BinaryRun run = Client("score a likes b");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, FormatFloat(FakeScore("a", "likes", "b")) + "\n");
}

TEST_F(ClientCommandTest, ScoreJsonHasEveryField) {
  const BinaryRun run = Client("--json score a likes b");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out,
            absl::StrCat("{\"head\":\"a\",\"relation\":\"likes\",\"tail\":\"b\",\"score\":",
                         FormatFloat(FakeScore("a", "likes", "b")),
                         ",\"probability\":0.5,\"known_fact\":true,\"subgraph_nodes\":2,"
                         "\"subgraph_edges\":1,\"graph_sequence\":0,\"scored_by\":\"fused\","
                         "\"pruned\":false}\n"));
}

TEST_F(ClientCommandTest, UnknownEntityIsNotFoundWithTheServersMessage) {
  const BinaryRun run = Client("score missing likes a");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_EQ(run.err, "error: NOT_FOUND: entity missing is not in the graph\n");
  EXPECT_EQ(run.out, "");
}

TEST_F(ClientCommandTest, ScoreFilePrintsOneTabSeparatedLinePerFact) {
  const std::string path =
      WriteTestFile("score_file.tsv", "a\tlikes\tb\nb\thates\tc\n\nc\tlikes\td\r\n");
  const BinaryRun run = Client("score-file " + path + " --batch 2");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(OutputLines(run),
              ElementsAre("a\tlikes\tb\t" + FormatFloat(FakeScore("a", "likes", "b")),
                          "b\thates\tc\t" + FormatFloat(FakeScore("b", "hates", "c")),
                          "c\tlikes\td\t" + FormatFloat(FakeScore("c", "likes", "d"))));
}

TEST_F(ClientCommandTest, RankTailsOverCandidatesPrintsRankEntityScoreBestFirst) {
  const std::string candidates = WriteTestFile("candidates.txt", "b\nc\n\nd\n");
  const BinaryRun run = Client("rank-tails a likes --candidates " + candidates);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::vector<std::string> lines = OutputLines(run);
  ASSERT_EQ(lines.size(), 3u);
  float previous = 1e9;
  std::vector<std::string> entities;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::vector<std::string> fields = absl::StrSplit(lines[i], '\t');
    ASSERT_EQ(fields.size(), 3u) << lines[i];
    EXPECT_EQ(fields[0], std::to_string(i + 1));
    EXPECT_EQ(fields[2], FormatFloat(FakeScore("a", "likes", fields[1])));
    const float score = std::stof(fields[2]);
    EXPECT_LE(score, previous);
    previous = score;
    entities.push_back(fields[1]);
  }
  EXPECT_THAT(entities, ::testing::UnorderedElementsAre("b", "c", "d"));
}

TEST_F(ClientCommandTest, RankHeadsHonoursTopKAndFilterKnown) {
  // Every entity (a..e) is a candidate; (a, likes, b) is stored, so --filter-known drops a.
  const BinaryRun run = Client("rank-heads likes b --top-k 2 --filter-known --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out,
              StartsWith("{\"relation\":\"likes\",\"tail\":\"b\",\"ranked\":[{\"rank\":1,"));
  EXPECT_THAT(run.out, HasSubstr("{\"rank\":2,"));
  EXPECT_THAT(run.out, Not(HasSubstr("{\"rank\":3,")));
  EXPECT_THAT(run.out, Not(HasSubstr("\"entity\":\"a\"")));
  EXPECT_THAT(run.out, HasSubstr("\"known_fact\":false,\"scored_by\":\"fused\",\"pruned\":false}"));
  EXPECT_THAT(run.out, HasSubstr("\"candidates_scored\":4,\"candidates_filtered\":1,"
                                 "\"candidates_shared_score\":3,\"candidates_pruned\":0,"));
}

TEST_F(ClientCommandTest, StatsPrintsJsonWithTheGraphSize) {
  const BinaryRun run = Client("stats");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, StartsWith("{\"entities\":5,\"relations\":2,\"facts\":1,"));
  EXPECT_THAT(run.out, HasSubstr("\"relations\":[\"likes\",\"hates\"]"));
  EXPECT_THAT(run.out, HasSubstr("\"parameters\":12345678901"));
  EXPECT_THAT(run.out, HasSubstr("\"version\":\"fake \\\"1\\\"\"}"));
  // What a caller reads after a reload's DEADLINE_EXCEEDED: which model serves.
  EXPECT_THAT(run.out, HasSubstr("\"version\":\"model.pt@0123456789abcdef\",\"generation\":7,"));
  EXPECT_THAT(run.out, HasSubstr("\"kge_models\":[{\"kind\":\"rotate\",\"dim\":32,"));
  // Every field of ModelInfo, this build's and any added later, is printed.
  const google::protobuf::Descriptor* model = kg::v1::ModelInfo::descriptor();
  for (int f = 0; f < model->field_count(); ++f) {
    EXPECT_THAT(run.out, HasSubstr(absl::StrCat("\"", model->field(f)->name(), "\":")))
        << model->field(f)->name();
  }
}

// GRAIL_TARGET in the environment is --target's default; --target still wins over it.
TEST_F(ClientCommandTest, TheEnvironmentsTargetIsTheDefaultAndTheFlagWins) {
  setenv("GRAIL_TARGET", server_.target().c_str(), 1);
  const BinaryRun from_environment = RunBinary("grail-client", "stats");
  const BinaryRun flag_wins = RunBinary("grail-client", "--target 127.0.0.1:1 stats");
  unsetenv("GRAIL_TARGET");
  ASSERT_EQ(from_environment.exit_code, 0) << from_environment.err;
  EXPECT_THAT(from_environment.out, StartsWith("{\"entities\":5,"));
  EXPECT_EQ(flag_wins.exit_code, 1);
  EXPECT_THAT(flag_wins.err, StartsWith("error: UNAVAILABLE: "));
}

TEST_F(ClientCommandTest, AddPrintsASummaryAndTheNewFactsAreVisible) {
  const std::string path = WriteTestFile(
      "add.tsv", "a\tlikes\tb\nx\tlikes\ty\ny\thates\tz\n\nz\tlikes\ta\nq\tlikes\tr\n");
  const BinaryRun run = Client("add " + path + " --chunk 2");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  // Chunks: lines 1-2, line 3 (ended by the blank line), lines 5-6.
  EXPECT_EQ(run.out.substr(0, run.out.find(" seconds=")),
            "chunks_acknowledged=3 facts_acknowledged=5 facts_added=4 duplicate_facts=1 "
            "entities_created=5 relations_created=0 last_sequence=3");
  EXPECT_THAT(run.out, HasSubstr(" facts_per_second="));
  const BinaryRun stats = Client("stats");
  EXPECT_THAT(stats.out, StartsWith("{\"entities\":10,\"relations\":2,\"facts\":5,"));
}

TEST_F(ClientCommandTest, AddWithoutAChunkSizeSendsTenThousandFactsAChunk) {
  std::string facts;
  for (int i = 0; i < 10001; ++i) absl::StrAppend(&facts, "e", i, "\tlikes\te", i + 1, "\n");
  const BinaryRun run = Client("add " + WriteTestFile("add_default.tsv", facts));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, StartsWith("chunks_acknowledged=2 facts_acknowledged=10001 "));
  ASSERT_EQ(service_.received_chunks().size(), 2u);
  EXPECT_EQ(service_.received_chunks()[0].facts, 10000);
}

TEST_F(ClientCommandTest, AddRejectedByTheServerSaysWhatIsStored) {
  const std::string path = WriteTestFile(
      "add_rejected.tsv", "x\tlikes\ty\ny\tlikes\tz\nz\tlikes\tw\nw\tbad\tv\nv\tlikes\tu\n");
  const BinaryRun run = Client("add " + path + " --chunk 2");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("error: INVALID_ARGUMENT: line 4: relation bad"));
  EXPECT_THAT(run.err, HasSubstr("stored before the error: 1 chunks, 2 facts (last sequence 1)"));
  EXPECT_THAT(run.err, HasSubstr("first unacknowledged chunk: " + path + " lines 3-4 (chunk 1)"));
  EXPECT_THAT(run.out, StartsWith("chunks_acknowledged=1 facts_acknowledged=2 "));
}

TEST_F(ClientCommandTest, AddJsonReportsTheErrorAndTheFirstUnacknowledgedChunk) {
  const std::string path =
      WriteTestFile("add_rejected_json.tsv", "x\tlikes\ty\ny\tbad\tz\nz\tlikes\tw\n");
  const BinaryRun run = Client("add " + path + " --chunk 1 --json");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.out, StartsWith("{\"ok\":false,\"chunks_sent\":"));
  EXPECT_THAT(run.out, HasSubstr("\"chunks_acknowledged\":1,"));
  EXPECT_THAT(run.out,
              HasSubstr("\"error\":{\"code\":\"INVALID_ARGUMENT\",\"message\":\"line 2: "));
  EXPECT_THAT(run.out, HasSubstr("\"first_unacknowledged\":{\"chunk_index\":1,\"first_line\":2,"
                                 "\"last_line\":2}}"));
}

TEST_F(ClientCommandTest, AddWithAMalformedLineNamesItAndSendsNothingOfItsChunk) {
  const std::string path =
      WriteTestFile("add_malformed.tsv", "x\tlikes\ty\ny\tlikes\tz\nz\tlikes\nw\tlikes\tv\n");
  const BinaryRun run = Client("add " + path + " --chunk 2");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("error: INVALID_ARGUMENT: " + path +
                                 ":3: expected 3 tab-separated fields"));
  EXPECT_EQ(service_.received_chunks().size(), 1u);
  EXPECT_THAT(run.out, StartsWith("chunks_acknowledged=1 facts_acknowledged=2 "));
}

TEST_F(ClientCommandTest, MissingFileIsNotFound) {
  const BinaryRun run = Client("add /nonexistent/facts.tsv");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, StartsWith("error: NOT_FOUND: cannot open /nonexistent/facts.tsv"));
}

TEST_F(ClientCommandTest, LoadJsonReportsThroughputLatencyAndStatusCounts) {
  const std::string path = WriteTestFile("load.tsv", "a\tlikes\tb\nb\tlikes\tc\nc\thates\td\n");
  const BinaryRun run = Client("load --triples " + path +
                               " --concurrency 3 --requests 30 --warmup 3 --seed 5 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, StartsWith("{\"method\":\"score\",\"concurrency\":3,\"requests\":30,"
                                  "\"warmup\":3,\"seed\":5,"));
  EXPECT_THAT(run.out, HasSubstr("\"errors\":0,"));
  EXPECT_THAT(run.out, HasSubstr("\"latency_ms\":{\"min\":"));
  EXPECT_THAT(run.out, HasSubstr("\"p99\":"));
  EXPECT_THAT(run.out, HasSubstr("\"status_counts\":{\"OK\":30}}"));
}

// --connections spreads the load's callers over connections of their own: the server sees
// several peers (each a caller of its own to a server without tokens), and one without it.
TEST_F(ClientCommandTest, LoadSpreadsItsCallersOverTheConnectionsAsked) {
  const std::string path = WriteTestFile("load_peers.tsv", "a\tlikes\tb\nb\tlikes\tc\n");
  const BinaryRun one = Client("load --triples " + path + " --concurrency 4 --requests 200");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(service_.score_peers().size(), 1u);
  const BinaryRun spread =
      Client("load --triples " + path + " --concurrency 4 --connections 4 --requests 400");
  ASSERT_EQ(spread.exit_code, 0) << spread.err;
  // One peer from the first run, and at least two more: the 4 threads take requests from a
  // shared counter, so a thread that started late may have issued none.
  EXPECT_GE(service_.score_peers().size(), 3u);
  EXPECT_EQ(Client("load --triples " + path + " --concurrency 2 --connections 3").exit_code, 2);
}

TEST_F(ClientCommandTest, LoadCountsErrorsByStatusCode) {
  // Ranking tails over a file whose entities include one the server does not know.
  const std::string path = WriteTestFile("load_rank.tsv", "a\tlikes\tmissing\n");
  const BinaryRun run =
      Client("load --triples " + path + " --method rank-tails --requests 4 --concurrency 2");
  EXPECT_EQ(run.exit_code, 1) << "every request failed";
  const std::vector<std::string> lines = OutputLines(run);
  ASSERT_EQ(lines.size(), 3u) << run.out;
  EXPECT_THAT(lines[0], StartsWith("method=rank-tails concurrency=2 requests=4 errors=4 "));
  EXPECT_THAT(lines[1], StartsWith("latency_ms p50="));
  EXPECT_EQ(lines[2], "status NOT_FOUND=4");
}

TEST_F(ClientCommandTest, LoadWithoutTriplesIsAUsageError) {
  const BinaryRun run = Client("load");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("load needs --triples FILE"));
}

}  // namespace
}  // namespace grail
