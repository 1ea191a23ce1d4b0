#include "datasets/synthetic_graph.h"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"

namespace grail {
namespace {

SyntheticGraphOptions Small(uint64_t seed) {
  SyntheticGraphOptions options;
  options.entities = 20000;
  options.facts = 100000;
  options.relations = 8;
  options.seed = seed;
  return options;
}

TEST(SyntheticGraphTest, HasExactlyTheEntitiesAndDistinctFactsAskedFor) {
  absl::StatusOr<std::vector<NamedTriple>> graph = GenerateSyntheticGraph(Small(1));
  ASSERT_TRUE(graph.ok()) << graph.status();
  ASSERT_EQ(graph->size(), 100000u);
  std::set<std::tuple<std::string, std::string, std::string>> distinct;
  absl::flat_hash_map<std::string, int> degree;
  std::set<std::string> relations;
  for (const NamedTriple& t : *graph) {
    EXPECT_NE(t.head, t.tail);
    distinct.insert({t.head, t.relation, t.tail});
    ++degree[t.head];
    ++degree[t.tail];
    relations.insert(t.relation);
  }
  EXPECT_EQ(distinct.size(), graph->size());
  EXPECT_EQ(degree.size(), 20000u);
  EXPECT_LE(relations.size(), 8u);
  EXPECT_GE(relations.size(), 4u);
}

TEST(SyntheticGraphTest, DegreesAreSkewedLikeAPowerLaw) {
  absl::StatusOr<std::vector<NamedTriple>> graph = GenerateSyntheticGraph(Small(2));
  ASSERT_TRUE(graph.ok());
  absl::flat_hash_map<std::string, int> degree;
  for (const NamedTriple& t : *graph) ++degree[t.head], ++degree[t.tail];
  std::vector<int> degrees;
  for (const auto& [name, d] : degree) degrees.push_back(d);
  std::sort(degrees.begin(), degrees.end());
  const double mean = 2.0 * graph->size() / degrees.size();
  // A hub far above the mean, and most entities below it.
  EXPECT_GT(degrees.back(), 100 * mean);
  EXPECT_LT(degrees[degrees.size() / 2], mean);
}

TEST(SyntheticGraphTest, TheSameSeedGivesTheSameGraphAndAnotherSeedAnother) {
  SyntheticGraphOptions options = Small(3);
  options.entities = 2000;
  options.facts = 8000;
  absl::StatusOr<std::vector<NamedTriple>> a = GenerateSyntheticGraph(options);
  absl::StatusOr<std::vector<NamedTriple>> b = GenerateSyntheticGraph(options);
  options.seed = 4;
  absl::StatusOr<std::vector<NamedTriple>> c = GenerateSyntheticGraph(options);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
}

TEST(SyntheticGraphTest, StreamingGivesTheSameFactsInTheSameOrderAndStopsAtTheSinksError) {
  SyntheticGraphOptions options = Small(5);
  options.entities = 2000;
  options.facts = 8000;
  absl::StatusOr<std::vector<NamedTriple>> whole = GenerateSyntheticGraph(options);
  ASSERT_TRUE(whole.ok());
  std::vector<NamedTriple> streamed;
  ASSERT_TRUE(GenerateSyntheticGraph(options, [&](const NamedTriple& t) {
                streamed.push_back(t);
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(streamed, *whole);
  size_t calls = 0;
  const absl::Status stopped = GenerateSyntheticGraph(options, [&](const NamedTriple&) {
    return ++calls == 10 ? absl::DataLossError("disk gone") : absl::OkStatus();
  });
  EXPECT_EQ(stopped.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(calls, 10u);
}

TEST(SyntheticGraphTest, ImpossibleOptionsAreRefused) {
  SyntheticGraphOptions options = Small(0);
  options.facts = options.entities - 1;
  EXPECT_EQ(GenerateSyntheticGraph(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Small(0);
  options.exponent = 1.0;
  EXPECT_EQ(GenerateSyntheticGraph(options).status().code(), absl::StatusCode::kInvalidArgument);
  options = Small(0);
  options.entities = 10;
  options.facts = 1000;
  EXPECT_EQ(GenerateSyntheticGraph(options).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace grail
