// Runs the real `grail-tools subgraph` binary and checks its output and exit codes.
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "graph/static_graph.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "model/grail/enclosing_subgraph.h"
#include "model/grail/subgraph_json.h"
#include "tests/testing/run_binary.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

// `grail-tools ARGS`, stdout and stderr together in `output` (errors are checked there).
struct ToolRun {
  int exit_code;
  std::string output;
};
ToolRun RunTool(const std::string& args, bool with_stderr = true) {
  BinaryRun run = RunBinary("grail-tools", args);
  return {run.exit_code, with_stderr ? run.all() : run.out};
}

class SubgraphCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ProcessTempPath("cmd_graph.txt");
    facts_ = {{"alice", "knows", "bob"},        {"bob", "works at", "acme"},
              {"carol", "works at", "acme"},    {"alice", "knows", "carol"},
              {"dave \"d\"", "knows", "alice"}, {"dave \"d\"", "works at", "acme"}};
    ASSERT_TRUE(WriteTripleFile(path_, facts_).ok());
  }
  std::string path_;
  std::vector<NamedTriple> facts_;
};

TEST_F(SubgraphCommandTest, PrintsTheSameSubgraphAsTheLibrary) {
  ToolRun run =
      RunTool("subgraph --graph " + path_ + " --head alice --relation 'works at' --tail acme",
              /*with_stderr=*/false);
  ASSERT_EQ(run.exit_code, 0) << run.output;

  IndexedTriples indexed;
  IndexTriples(facts_, &indexed);
  StaticGraph graph(indexed.entities.size(), indexed.triples);
  SubgraphExtractor extractor(ExtractionConfig{});
  EnclosingSubgraph subgraph;
  ASSERT_TRUE(extractor
                  .Extract(graph, *indexed.entities.Find("alice"),
                           *indexed.relations.Find("works at"), *indexed.entities.Find("acme"),
                           false, &subgraph)
                  .ok());
  EXPECT_EQ(run.output, SubgraphToJson(subgraph, indexed.entities, indexed.relations) + "\n");
  // Spot-check the contract's shape and the escaping of a name with quotes.
  EXPECT_THAT(run.output, HasSubstr("{\"name\":\"alice\",\"du\":0,\"dv\":1}"));
  EXPECT_THAT(run.output, HasSubstr("{\"name\":\"acme\",\"du\":1,\"dv\":0}"));
  EXPECT_THAT(run.output, HasSubstr("\"dave \\\"d\\\"\""));
  EXPECT_THAT(run.output,
              HasSubstr("{\"head\":\"alice\",\"relation\":\"works at\",\"tail\":\"acme\"}"));
}

TEST_F(SubgraphCommandTest, HopsAndNoEnclosingFlagsChangeTheResult) {
  ToolRun k1 =
      RunTool("subgraph --graph " + path_ + " --head alice --relation knows --tail bob --hops 1");
  ToolRun k3 =
      RunTool("subgraph --graph " + path_ + " --head alice --relation knows --tail bob --hops 3");
  ASSERT_EQ(k1.exit_code, 0) << k1.output;
  ASSERT_EQ(k3.exit_code, 0) << k3.output;
  EXPECT_THAT(k1.output, ::testing::Not(HasSubstr("acme")));
  EXPECT_THAT(k3.output, HasSubstr("acme"));
  ToolRun un = RunTool("subgraph --graph " + path_ +
                       " --head alice --relation knows --tail bob --hops 1 --no-enclosing");
  ASSERT_EQ(un.exit_code, 0) << un.output;
  EXPECT_THAT(un.output, HasSubstr("\"dv\":null"));
}

TEST_F(SubgraphCommandTest, UnknownEntityFailsNamingIt) {
  ToolRun run = RunTool("subgraph --graph " + path_ + " --head alice --relation knows --tail zed");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr("unknown entity 'zed'"));
}

TEST_F(SubgraphCommandTest, SameHeadAndTailIsRejected) {
  ToolRun run = RunTool("subgraph --graph " + path_ + " --head bob --relation knows --tail bob");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr("same entity"));
}

TEST_F(SubgraphCommandTest, MalformedGraphFileReportsFileAndLine) {
  const std::string bad = ProcessTempPath("bad.txt");
  std::ofstream(bad) << "a\tr\tb\nbroken line\n";
  ToolRun run = RunTool("subgraph --graph " + bad + " --head a --relation r --tail b");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.output, HasSubstr(bad + ":2:"));
}

TEST_F(SubgraphCommandTest, MissingRequiredFlagsIsAUsageError) {
  ToolRun run = RunTool("subgraph --graph " + path_ + " --head alice");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.output, HasSubstr("--relation"));
}

}  // namespace
}  // namespace grail
