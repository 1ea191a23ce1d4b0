#include "datasets/inductive_split.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/seeded_random.h"
#include "datasets/wordnet.h"
#include "gmock/gmock.h"
#include "graph/triple_file.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::HasSubstr;
using Fact = std::tuple<std::string, std::string, std::string>;

Fact Key(const NamedTriple& t) { return {t.head, t.relation, t.tail}; }

std::set<Fact> FactsOf(const std::vector<NamedTriple>& triples) {
  std::set<Fact> facts;
  for (const NamedTriple& t : triples) facts.insert(Key(t));
  return facts;
}

std::set<std::string> EntitiesOf(const std::vector<NamedTriple>& triples) {
  std::set<std::string> entities;
  for (const NamedTriple& t : triples) {
    entities.insert(t.head);
    entities.insert(t.tail);
  }
  return entities;
}

std::set<std::string> RelationsOf(const std::vector<NamedTriple>& triples) {
  std::set<std::string> relations;
  for (const NamedTriple& t : triples) relations.insert(t.relation);
  return relations;
}

std::vector<NamedTriple> AllOf(const SplitGraph& graph) {
  std::vector<NamedTriple> all = graph.train;
  all.insert(all.end(), graph.valid.begin(), graph.valid.end());
  all.insert(all.end(), graph.test.begin(), graph.test.end());
  return all;
}

// A random multigraph: `facts` draws of (head, relation, tail), seeded.
std::vector<NamedTriple> RandomGraph(int entities, int facts, int relations, uint64_t seed) {
  SeededRandom random(seed);
  std::vector<NamedTriple> triples;
  for (int i = 0; i < facts; ++i) {
    triples.push_back({absl::StrCat("e", random.Uniform(entities)),
                       absl::StrCat("r", random.Uniform(relations)),
                       absl::StrCat("e", random.Uniform(entities))});
  }
  return triples;
}

// Entities e<offset> .. e<offset + n - 1>, every pair i < j linked by `relation`.
void AddClique(int offset, int n, const std::string& relation, std::vector<NamedTriple>* out) {
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      out->push_back({absl::StrCat("e", offset + i), relation, absl::StrCat("e", offset + j)});
    }
  }
}

InductiveSplitOptions SmallOptions(uint64_t seed) {
  InductiveSplitOptions options;
  options.seed = seed;
  options.train = {20, 2, 20};
  options.test = {10, 2, 20};
  return options;
}

// Everything the split promises, checked against the input it was cut from.
void ExpectSplitInvariants(const std::vector<NamedTriple>& input, const InductiveSplit& split) {
  const std::set<Fact> input_facts = FactsOf(input);
  const SplitGraph& train_graph = split.train_graph;
  const SplitGraph& test_graph = split.test_graph;
  ASSERT_FALSE(train_graph.train.empty());
  ASSERT_FALSE(test_graph.train.empty());

  // Entity sets of <name> and <name>_ind are disjoint.
  const std::set<std::string> train_entities = EntitiesOf(AllOf(train_graph));
  const std::set<std::string> test_entities = EntitiesOf(AllOf(test_graph));
  for (const std::string& e : test_entities) {
    ASSERT_EQ(train_entities.count(e), 0u) << e << " is in both graphs";
  }

  // Every relation of the test graph is learnt from the train graph's train part.
  const std::set<std::string> trained_relations = RelationsOf(train_graph.train);
  for (const std::string& r : RelationsOf(AllOf(test_graph))) {
    EXPECT_EQ(trained_relations.count(r), 1u) << r << " is not in the train graph's train.txt";
  }
  for (const std::string& r : RelationsOf(AllOf(train_graph))) {
    EXPECT_EQ(trained_relations.count(r), 1u) << r << " held out of the train graph entirely";
  }

  for (const SplitGraph* graph : {&train_graph, &test_graph}) {
    // Every valid/test entity occurs in its graph's train part.
    const std::set<std::string> known = EntitiesOf(graph->train);
    for (const std::vector<NamedTriple>* part : {&graph->valid, &graph->test}) {
      for (const std::string& e : EntitiesOf(*part)) {
        EXPECT_EQ(known.count(e), 1u) << e << " is held out but not in train";
      }
    }
    // Every fact comes from the input.
    for (const NamedTriple& t : AllOf(*graph)) {
      ASSERT_EQ(input_facts.count(Key(t)), 1u) << t.head << " " << t.relation << " " << t.tail;
    }
  }

  // No fact appears twice, in one part or across the six.
  std::vector<NamedTriple> everything = AllOf(train_graph);
  const std::vector<NamedTriple> test_all = AllOf(test_graph);
  everything.insert(everything.end(), test_all.begin(), test_all.end());
  EXPECT_EQ(FactsOf(everything).size(), everything.size());

  // Each graph is induced by its entities: every input fact among them is kept (for the
  // test graph, every one whose relation the train graph has).
  const std::set<std::string> train_graph_relations = RelationsOf(AllOf(train_graph));
  const std::set<Fact> train_graph_facts = FactsOf(AllOf(train_graph));
  const std::set<Fact> test_graph_facts = FactsOf(test_all);
  for (const Fact& f : input_facts) {
    const auto& [head, relation, tail] = f;
    if (train_entities.count(head) && train_entities.count(tail)) {
      EXPECT_EQ(train_graph_facts.count(f), 1u) << head << " " << relation << " " << tail;
    }
    if (test_entities.count(head) && test_entities.count(tail) &&
        train_graph_relations.count(relation)) {
      EXPECT_EQ(test_graph_facts.count(f), 1u) << head << " " << relation << " " << tail;
    }
  }
}

TEST(InductiveSplitTest, RandomGraphSplitKeepsEveryPromise) {
  const std::vector<NamedTriple> input = RandomGraph(2000, 6000, 8, 1);
  absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(input, SmallOptions(0));
  ASSERT_TRUE(split.ok()) << split.status();
  ExpectSplitInvariants(input, *split);
}

TEST(InductiveSplitTest, SplitEntitySetsAreDisjointForManySeeds) {
  const std::vector<NamedTriple> input = RandomGraph(2000, 6000, 8, 2);
  for (uint64_t seed = 0; seed < 5; ++seed) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(input, SmallOptions(seed));
    ASSERT_TRUE(split.ok()) << split.status();
    ExpectSplitInvariants(input, *split);
  }
}

TEST(InductiveSplitTest, HoldsOutAtMostTheRequestedFractions) {
  const std::vector<NamedTriple> input = RandomGraph(2000, 6000, 8, 3);
  InductiveSplitOptions options = SmallOptions(0);
  options.valid_fraction = 0.1;
  options.test_fraction = 0.2;
  absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(input, options);
  ASSERT_TRUE(split.ok()) << split.status();
  for (const SplitGraph* graph : {&split->train_graph, &split->test_graph}) {
    const size_t n = AllOf(*graph).size();
    EXPECT_LE(graph->valid.size(), static_cast<size_t>(0.1 * n));
    EXPECT_LE(graph->test.size(), static_cast<size_t>(0.2 * n));
    EXPECT_GT(graph->valid.size(), 0u);
    EXPECT_GT(graph->test.size(), graph->valid.size());
  }
}

TEST(InductiveSplitTest, SameSeedGivesIdenticalSplitAndOtherSeedDoesNot) {
  const std::vector<NamedTriple> input = RandomGraph(2000, 6000, 8, 4);
  absl::StatusOr<InductiveSplit> a = GenerateInductiveSplit(input, SmallOptions(7));
  absl::StatusOr<InductiveSplit> b = GenerateInductiveSplit(input, SmallOptions(7));
  absl::StatusOr<InductiveSplit> c = GenerateInductiveSplit(input, SmallOptions(8));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->train_graph.train, b->train_graph.train);
  EXPECT_EQ(a->train_graph.valid, b->train_graph.valid);
  EXPECT_EQ(a->train_graph.test, b->train_graph.test);
  EXPECT_EQ(a->test_graph.train, b->test_graph.train);
  EXPECT_EQ(a->test_graph.valid, b->test_graph.valid);
  EXPECT_EQ(a->test_graph.test, b->test_graph.test);
  EXPECT_NE(AllOf(a->train_graph), AllOf(c->train_graph));
  EXPECT_NE(a->train_graph.valid, c->train_graph.valid);
}

TEST(InductiveSplitTest, CapLimitsEntitiesReachedPerHop) {
  // In a clique every entity is one hop from every other, so without the cap one hop would
  // take all 60.
  std::vector<NamedTriple> input;
  AddClique(0, 60, "r", &input);
  InductiveSplitOptions options;
  options.valid_fraction = 0;
  options.test_fraction = 0;
  options.train = {1, 1, 5};
  options.test = {1, 2, 5};
  absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(input, options);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_EQ(EntitiesOf(split->train_graph.train).size(), 6u);  // root + 5
  EXPECT_EQ(split->train_graph.train.size(), 15u);             // all pairs among them
  EXPECT_EQ(EntitiesOf(split->test_graph.train).size(), 11u);  // root + 5 + 5
}

TEST(InductiveSplitTest, NeighbourhoodsStopAfterKHops) {
  // A path e0 - e1 - ... - e99: a 2-hop neighbourhood is at most 5 consecutive entities.
  std::vector<NamedTriple> input;
  for (int i = 0; i + 1 < 100; ++i) {
    input.push_back({absl::StrCat("e", i), "next", absl::StrCat("e", i + 1)});
  }
  InductiveSplitOptions options;
  options.valid_fraction = 0;
  options.test_fraction = 0;
  options.train = {1, 2, 0};
  options.test = {1, 2, 0};
  for (uint64_t seed = 0; seed < 10; ++seed) {
    options.seed = seed;
    absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(input, options);
    ASSERT_TRUE(split.ok()) << split.status();
    for (const SplitGraph* graph : {&split->train_graph, &split->test_graph}) {
      std::vector<int> ids;
      for (const std::string& e : EntitiesOf(graph->train)) ids.push_back(std::stoi(e.substr(1)));
      std::sort(ids.begin(), ids.end());
      ASSERT_FALSE(ids.empty());
      EXPECT_GE(ids.size(), 2u);
      EXPECT_LE(ids.size(), 5u);
      EXPECT_EQ(ids.back() - ids.front() + 1, static_cast<int>(ids.size())) << "not contiguous";
    }
  }
}

TEST(InductiveSplitTest, TestFactsWithRelationsUnseenInTrainGraphAreDropped) {
  // Two cliques; the second also uses `only_y`. One hop without a cap takes a whole clique.
  std::vector<NamedTriple> input;
  AddClique(0, 6, "common", &input);
  AddClique(100, 6, "common", &input);
  AddClique(100, 6, "only_y", &input);
  InductiveSplitOptions options;
  options.valid_fraction = 0;
  options.test_fraction = 0;
  options.train = {1, 1, 0};
  options.test = {1, 1, 0};
  bool saw_drop = false;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    options.seed = seed;
    absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(input, options);
    ASSERT_TRUE(split.ok()) << split.status();
    if (RelationsOf(split->train_graph.train).count("only_y")) continue;
    saw_drop = true;
    EXPECT_EQ(RelationsOf(split->test_graph.train), std::set<std::string>{"common"});
    EXPECT_EQ(split->test_graph.train.size(), 15u);
  }
  EXPECT_TRUE(saw_drop) << "no seed in 0..19 sampled the train graph from the first clique";
}

TEST(InductiveSplitTest, FactsAreHeldOutOnlyIfBothEntitiesKeepAFact) {
  // Two stars: every fact touches a leaf that has no other fact, so none may be held out.
  std::vector<NamedTriple> input;
  for (int star : {0, 1}) {
    for (int leaf = 0; leaf < 20; ++leaf) {
      input.push_back({absl::StrCat("hub", star), "r", absl::StrCat("leaf", star, "_", leaf)});
    }
  }
  InductiveSplitOptions options;
  options.valid_fraction = 0.3;
  options.test_fraction = 0.3;
  options.train = {1, 2, 0};
  options.test = {1, 2, 0};
  absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(input, options);
  ASSERT_TRUE(split.ok()) << split.status();
  for (const SplitGraph* graph : {&split->train_graph, &split->test_graph}) {
    EXPECT_EQ(graph->train.size(), 20u);
    EXPECT_TRUE(graph->valid.empty());
    EXPECT_TRUE(graph->test.empty());
  }
}

TEST(InductiveSplitTest, ARelationsLastTrainFactIsNeverHeldOut) {
  // Two 8-cliques where one edge of each has relation `rare`; holding out 80% of facts
  // would take it if it were allowed to.
  std::vector<NamedTriple> input;
  for (int offset : {0, 100}) {
    AddClique(offset, 8, "common", &input);
    input.erase(
        std::find(input.begin(), input.end(),
                  NamedTriple{absl::StrCat("e", offset), "common", absl::StrCat("e", offset + 1)}));
    input.push_back({absl::StrCat("e", offset), "rare", absl::StrCat("e", offset + 1)});
  }
  InductiveSplitOptions options;
  options.valid_fraction = 0.4;
  options.test_fraction = 0.4;
  options.train = {1, 1, 0};
  options.test = {1, 1, 0};
  for (uint64_t seed = 0; seed < 20; ++seed) {
    options.seed = seed;
    absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(input, options);
    ASSERT_TRUE(split.ok()) << split.status();
    EXPECT_EQ(RelationsOf(split->train_graph.train).count("rare"), 1u) << "seed " << seed;
    ExpectSplitInvariants(input, *split);
  }
}

TEST(InductiveSplitTest, RejectsInvalidOptions) {
  const std::vector<NamedTriple> input = RandomGraph(200, 600, 3, 5);
  auto with = [](auto change) {
    InductiveSplitOptions options = SmallOptions(0);
    change(options);
    return options;
  };
  const std::vector<InductiveSplitOptions> bad = {
      with([](InductiveSplitOptions& o) { o.train.roots = 0; }),
      with([](InductiveSplitOptions& o) { o.test.roots = -3; }),
      with([](InductiveSplitOptions& o) { o.train.hops = 0; }),
      with([](InductiveSplitOptions& o) { o.test.max_new_per_hop = -1; }),
      with([](InductiveSplitOptions& o) { o.valid_fraction = -0.1; }),
      with([](InductiveSplitOptions& o) { o.test_fraction = 1.0; }),
      with([](InductiveSplitOptions& o) { o.valid_fraction = 0.6, o.test_fraction = 0.4; }),
      with([](InductiveSplitOptions& o) { o.valid_fraction = std::nan(""); }),
  };
  for (size_t i = 0; i < bad.size(); ++i) {
    absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(input, bad[i]);
    ASSERT_FALSE(split.ok()) << "case " << i;
    EXPECT_EQ(split.status().code(), absl::StatusCode::kInvalidArgument) << "case " << i;
  }
}

TEST(InductiveSplitTest, MoreRootsThanEntitiesIsAnError) {
  const std::vector<NamedTriple> input = RandomGraph(50, 100, 3, 6);
  InductiveSplitOptions options = SmallOptions(0);
  options.train.roots = 51;
  absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(input, options);
  ASSERT_FALSE(split.ok());
  EXPECT_EQ(split.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(split.status().message(), HasSubstr("too small"));
  EXPECT_FALSE(GenerateInductiveSplit({}, SmallOptions(0)).ok());
}

std::string ReadBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

TEST(InductiveSplitTest, WriteCreatesSixFilesThatReadBackEqualAndByteIdenticalPerSeed) {
  const std::vector<NamedTriple> input = RandomGraph(2000, 6000, 8, 7);
  absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(input, SmallOptions(3));
  absl::StatusOr<InductiveSplit> again = GenerateInductiveSplit(input, SmallOptions(3));
  ASSERT_TRUE(split.ok() && again.ok());
  const std::filesystem::path root =
      std::filesystem::path(ProcessTempPath("inductive_split_write"));
  std::filesystem::remove_all(root);
  ASSERT_TRUE(WriteInductiveSplit(*split, (root / "a").string(), "toy").ok());
  ASSERT_TRUE(WriteInductiveSplit(*again, (root / "b").string(), "toy").ok());

  const std::pair<const SplitGraph*, std::string> graphs[] = {{&split->train_graph, "toy"},
                                                              {&split->test_graph, "toy_ind"}};
  for (const auto& [graph, dir] : graphs) {
    const std::pair<const std::vector<NamedTriple>*, std::string> parts[] = {
        {&graph->train, "train.txt"}, {&graph->valid, "valid.txt"}, {&graph->test, "test.txt"}};
    for (const auto& [triples, file] : parts) {
      const std::filesystem::path path = root / "a" / dir / file;
      absl::StatusOr<std::vector<NamedTriple>> read = ReadTripleFile(path.string());
      ASSERT_TRUE(read.ok()) << read.status();
      EXPECT_EQ(*read, *triples) << path;
      EXPECT_EQ(ReadBytes(path), ReadBytes(root / "b" / dir / file)) << path;
    }
  }
  std::filesystem::remove_all(root);
}

TEST(InductiveSplitTest, WriteRejectsAnEmptyName) {
  EXPECT_FALSE(WriteInductiveSplit(InductiveSplit{}, ::testing::TempDir(), "").ok());
}

// The embedded default: WordNet's ~218k facts, with the sampling the `split` tool defaults to.
TEST(InductiveSplitTest, WordNetSplitKeepsEveryPromise) {
  if (!std::filesystem::exists(std::string(kDefaultWordNetDir) + "/data.noun")) {
    GTEST_SKIP() << "WordNet is not installed at " << kDefaultWordNetDir;
  }
  absl::StatusOr<std::vector<NamedTriple>> wordnet = ConvertWordNet(kDefaultWordNetDir);
  ASSERT_TRUE(wordnet.ok()) << wordnet.status();
  InductiveSplitOptions options;
  options.train = {130, 6, 5};
  options.test = {50, 6, 5};
  absl::StatusOr<InductiveSplit> split = GenerateInductiveSplit(*wordnet, options);
  ASSERT_TRUE(split.ok()) << split.status();
  ExpectSplitInvariants(*wordnet, *split);

  options.seed = 1;
  absl::StatusOr<InductiveSplit> other = GenerateInductiveSplit(*wordnet, options);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(split->train_graph.train, other->train_graph.train);
}

}  // namespace
}  // namespace grail
