#include "datasets/wordnet.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAreArray;

std::string Dict() { return kDefaultWordNetDir; }

bool HaveRealWordNet() { return std::filesystem::exists(Dict() + "/data.noun"); }

std::tuple<std::string, std::string, std::string> Key(const NamedTriple& t) {
  return {t.head, t.relation, t.tail};
}

// The real database is converted once for all tests that read it.
class RealWordNetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (HaveRealWordNet()) {
      converted_ = new absl::StatusOr<std::vector<NamedTriple>>(ConvertWordNet(Dict()));
    }
  }
  static void TearDownTestSuite() {
    delete converted_;
    converted_ = nullptr;
  }
  void SetUp() override {
    if (converted_ == nullptr) GTEST_SKIP() << "WordNet is not installed at " << Dict();
    ASSERT_TRUE(converted_->ok()) << converted_->status();
  }
  static const std::vector<NamedTriple>& Triples() { return **converted_; }
  static bool Contains(const std::string& head, const std::string& relation,
                       const std::string& tail) {
    return std::binary_search(
        Triples().begin(), Triples().end(), NamedTriple{head, relation, tail},
        [](const NamedTriple& a, const NamedTriple& b) { return Key(a) < Key(b); });
  }

  static absl::StatusOr<std::vector<NamedTriple>>* converted_;
};

absl::StatusOr<std::vector<NamedTriple>>* RealWordNetTest::converted_ = nullptr;

TEST(WordNetRelationNamesTest, AreWN18RRsElevenRelationsInFixedOrder) {
  EXPECT_THAT(
      WordNetRelationNames(),
      ElementsAre("_hypernym", "_derivationally_related_form", "_member_meronym", "_has_part",
                  "_also_see", "_verb_group", "_similar_to", "_synset_domain_topic_of",
                  "_member_of_domain_usage", "_member_of_domain_region", "_instance_hypernym"));
}

TEST_F(RealWordNetTest, UsesAllElevenRelationsAndNoOther) {
  std::set<std::string> relations;
  for (const NamedTriple& t : Triples()) relations.insert(t.relation);
  EXPECT_THAT(relations, UnorderedElementsAreArray(WordNetRelationNames()));
}

TEST_F(RealWordNetTest, DogIsACanineAndADomesticAnimal) {
  EXPECT_TRUE(Contains("dog.n.01", "_hypernym", "canine.n.02"));
  EXPECT_TRUE(Contains("dog.n.01", "_hypernym", "domestic_animal.n.01"));
  // Direction: the hyponym is the head, as in WN18RR.
  EXPECT_FALSE(Contains("canine.n.02", "_hypernym", "dog.n.01"));
  // The genus has the species as a member; the dog has a flag (its tail) as a part.
  EXPECT_TRUE(Contains("canis.n.01", "_member_meronym", "dog.n.01"));
  EXPECT_TRUE(Contains("dog.n.01", "_has_part", "flag.n.07"));
}

TEST_F(RealWordNetTest, ReadsInstanceAndDomainPointersInWN18RRsDirection) {
  EXPECT_TRUE(Contains("paris.n.01", "_instance_hypernym", "national_capital.n.01"));
  EXPECT_TRUE(Contains("paris.n.01", "_has_part", "eiffel_tower.n.01"));
  // Domains: the member points at its topic; the region points at its members.
  EXPECT_TRUE(Contains("access.v.01", "_synset_domain_topic_of", "computer_science.n.01"));
  EXPECT_TRUE(Contains("afghanistan.n.01", "_member_of_domain_region", "al-qaeda.n.01"));
}

TEST_F(RealWordNetTest, LiftsLexicalPointersToTheirSynsets) {
  // `denier` -> `deny` is a pointer between words (source/target != 0000).
  EXPECT_TRUE(Contains("denier.n.03", "_derivationally_related_form", "deny.v.01"));
  EXPECT_TRUE(Contains("deny.v.01", "_derivationally_related_form", "denier.n.03"));
}

TEST_F(RealWordNetTest, OutputIsSortedWithoutDuplicatesOrSelfLoops) {
  const std::vector<NamedTriple>& triples = Triples();
  ASSERT_FALSE(triples.empty());
  for (size_t i = 1; i < triples.size(); ++i) {
    ASSERT_LT(Key(triples[i - 1]), Key(triples[i])) << "at line " << i + 1;
  }
  for (const NamedTriple& t : triples) {
    ASSERT_NE(t.head, t.tail) << t.relation;
  }
}

TEST_F(RealWordNetTest, NamesFollowNltkLemmaPosSense) {
  for (const NamedTriple& t : Triples()) {
    for (const std::string* name : {&t.head, &t.tail}) {
      const std::vector<absl::string_view> parts = absl::StrSplit(*name, '.');
      ASSERT_GE(parts.size(), 3u) << *name;
      const absl::string_view sense = parts[parts.size() - 1];
      const absl::string_view pos = parts[parts.size() - 2];
      int number = 0;
      ASSERT_EQ(sense.size(), 2u) << *name;  // WordNet 3.0 has no lemma with 100 senses
      ASSERT_TRUE(absl::SimpleAtoi(sense, &number) && number >= 1) << *name;
      ASSERT_TRUE(pos == "n" || pos == "v" || pos == "a" || pos == "s" || pos == "r") << *name;
      ASSERT_EQ(absl::AsciiStrToLower(*name), *name);
    }
  }
}

// An oracle written independently of the converter: parse the data files naively, keep the
// pointers whose symbol is one of the 11 (WN18RR's direction), key synsets by file and offset.
// If two synsets shared a name, the converter would report fewer entities or facts.
TEST_F(RealWordNetTest, EverySynsetWithAFactGetsItsOwnNameAndEveryPointerOneFact) {
  const std::vector<std::pair<std::string, std::string>> kSymbols = {
      {"@", "_hypernym"},
      {"+", "_derivationally_related_form"},
      {"%m", "_member_meronym"},
      {"%p", "_has_part"},
      {"^", "_also_see"},
      {"$", "_verb_group"},
      {"&", "_similar_to"},
      {";c", "_synset_domain_topic_of"},
      {"-u", "_member_of_domain_usage"},
      {"-r", "_member_of_domain_region"},
      {"@i", "_instance_hypernym"}};
  auto file_of = [](const std::string& pos) -> std::string {
    if (pos == "n") return "noun";
    if (pos == "v") return "verb";
    if (pos == "r") return "adv";
    return "adj";
  };
  using Synset = std::pair<std::string, std::string>;  // file, offset
  std::set<std::tuple<Synset, std::string, Synset>> facts;
  for (const char* file : {"noun", "verb", "adj", "adv"}) {
    std::ifstream in(Dict() + "/data." + file);
    std::string line;
    while (std::getline(in, line)) {
      if (absl::StartsWith(line, "  ")) continue;
      std::vector<std::string> tokens = absl::StrSplit(line, ' ');
      int words = std::stoi(tokens[3], nullptr, 16);
      size_t at = 4 + 2 * words;
      int pointers = std::stoi(tokens[at++]);
      for (int p = 0; p < pointers; ++p, at += 4) {
        for (const auto& [symbol, relation] : kSymbols) {
          if (tokens[at] != symbol) continue;
          Synset head{file, tokens[0]};
          Synset tail{file_of(tokens[at + 2]), tokens[at + 1]};
          if (head != tail) facts.insert({head, relation, tail});
        }
      }
    }
  }
  std::set<Synset> synsets;
  for (const auto& [head, relation, tail] : facts) {
    synsets.insert(head);
    synsets.insert(tail);
  }
  std::set<std::string> names;
  for (const NamedTriple& t : Triples()) {
    names.insert(t.head);
    names.insert(t.tail);
  }
  EXPECT_EQ(names.size(), synsets.size());
  EXPECT_EQ(Triples().size(), facts.size());
}

// A hand-written database, small enough to know its triples by heart.
class FakeWordNetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           absl::StrCat("fake_wordnet_",
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    const std::string header = "  1 This software and database is provided as is.  \n";
    files_["data.noun"] =
        header +
        "00000100 03 n 01 Thing 0 001 ~ 00000200 n 0000 | a thing  \n"
        // Two lexical pointers into the same verb synset collapse into one fact; the
        // lexical pointer between this synset's own two words would be a self-loop.
        "00000200 05 n 02 dog 0 domestic_dog 0 005 @ 00000100 n 0000 @ 00000300 n 0000 "
        "+ 00000100 v 0101 + 00000100 v 0201 + 00000200 n 0102 | a dog  \n"
        "00000300 05 n 01 dog 0 002 ~ 00000200 n 0000 %p 00000100 n 0000 | another dog  \n";
    // Verb lines carry frames after the pointers.
    files_["data.verb"] =
        header +
        "00000100 32 v 01 bark 0 002 + 00000200 n 0101 $ 00000150 v 0000 01 + 02 00 | bark  \n"
        "00000150 32 v 01 yelp 0 001 $ 00000100 v 0000 01 + 02 00 | yelp  \n";
    // A satellite whose word carries an adjective marker.
    files_["data.adj"] =
        header +
        "00000100 00 a 01 loud 0 001 & 00000200 s 0000 | loud  \n"
        "00000200 00 s 01 blaring(a) 0 002 & 00000100 a 0000 ^ 00000100 r 0101 | blaring  \n";
    // A pertainym is no WN18RR relation.
    files_["data.adv"] = header + "00000100 02 r 01 loudly 0 001 \\ 00000100 a 0101 | loudly  \n";
    // The index, not the offset order, fixes sense numbers: 00000300 is dog's first sense.
    files_["index.noun"] = header +
                           "dog n 2 2 @ ~ 2 1 00000300 00000200  \n"
                           "domestic_dog n 1 1 @ 1 0 00000200  \n"
                           "thing n 1 1 ~ 1 0 00000100  \n";
    files_["index.verb"] = header +
                           "bark v 1 2 $ + 1 0 00000100  \n"
                           "yelp v 1 1 $ 1 0 00000150  \n";
    files_["index.adj"] = header +
                          "blaring a 1 2 & ^ 1 0 00000200  \n"
                          "loud a 1 1 & 1 0 00000100  \n";
    files_["index.adv"] = header + "loudly r 1 1 \\ 1 0 00000100  \n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  absl::StatusOr<std::vector<NamedTriple>> Convert() {
    for (const auto& [name, text] : files_) {
      std::ofstream(dir_ / name, std::ios::binary) << text;
    }
    return ConvertWordNet(dir_.string());
  }

  std::filesystem::path dir_;
  std::map<std::string, std::string> files_;
};

TEST_F(FakeWordNetTest, ParsesToExactlyTheExpectedTriples) {
  absl::StatusOr<std::vector<NamedTriple>> triples = Convert();
  ASSERT_TRUE(triples.ok()) << triples.status();
  std::vector<std::tuple<std::string, std::string, std::string>> keys;
  for (const NamedTriple& t : *triples) keys.push_back(Key(t));
  EXPECT_THAT(keys,
              ElementsAre(std::make_tuple("bark.v.01", "_derivationally_related_form", "dog.n.02"),
                          std::make_tuple("bark.v.01", "_verb_group", "yelp.v.01"),
                          std::make_tuple("blaring.s.01", "_also_see", "loudly.r.01"),
                          std::make_tuple("blaring.s.01", "_similar_to", "loud.a.01"),
                          std::make_tuple("dog.n.01", "_has_part", "thing.n.01"),
                          std::make_tuple("dog.n.02", "_derivationally_related_form", "bark.v.01"),
                          std::make_tuple("dog.n.02", "_hypernym", "dog.n.01"),
                          std::make_tuple("dog.n.02", "_hypernym", "thing.n.01"),
                          std::make_tuple("loud.a.01", "_similar_to", "blaring.s.01"),
                          std::make_tuple("yelp.v.01", "_verb_group", "bark.v.01")));
}

TEST_F(FakeWordNetTest, SynsetMissingFromTheIndexIsNamedByItsOffset) {
  files_["index.verb"] = "bark v 1 2 $ + 1 0 00000100  \n";
  absl::StatusOr<std::vector<NamedTriple>> triples = Convert();
  ASSERT_TRUE(triples.ok()) << triples.status();
  std::set<std::string> names;
  for (const NamedTriple& t : *triples) names.insert(t.head);
  EXPECT_TRUE(names.count("yelp.v.00000150")) << "names: " << names.size();
  EXPECT_TRUE(names.count("bark.v.01"));
}

TEST_F(FakeWordNetTest, MalformedDataLineIsReportedWithFileAndLine) {
  // Line 3 of data.verb (after the header and one good line): p_cnt is not a number.
  files_["data.verb"] =
      "  1 header  \n"
      "00000100 32 v 01 bark 0 002 + 00000200 n 0101 $ 00000150 v 0000 01 + 02 00 | bark  \n"
      "00000150 32 v 01 yelp 0 x01 $ 00000100 v 0000 01 + 02 00 | yelp  \n";
  absl::StatusOr<std::vector<NamedTriple>> triples = Convert();
  ASSERT_FALSE(triples.ok());
  EXPECT_EQ(triples.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(triples.status().message(), HasSubstr("data.verb:3"));
}

TEST_F(FakeWordNetTest, TruncatedPointerListIsAnError) {
  files_["data.noun"] = "00000100 03 n 01 thing 0 002 @ 00000200 n 0000 | a thing  \n";
  absl::StatusOr<std::vector<NamedTriple>> triples = Convert();
  ASSERT_FALSE(triples.ok());
  EXPECT_THAT(triples.status().message(), HasSubstr("data.noun:1"));
}

TEST_F(FakeWordNetTest, PointerToUnknownSynsetIsReportedWithFileAndLine) {
  files_["data.adv"] = "  1 header  \n00000100 02 r 01 loudly 0 001 ^ 00000999 a 0000 | x  \n";
  absl::StatusOr<std::vector<NamedTriple>> triples = Convert();
  ASSERT_FALSE(triples.ok());
  EXPECT_THAT(triples.status().message(), HasSubstr("data.adv:2"));
  EXPECT_THAT(triples.status().message(), HasSubstr("00000999"));
}

TEST_F(FakeWordNetTest, MalformedIndexLineIsReportedWithFileAndLine) {
  files_["index.adj"] = "loud a 2 1 & 1 0 00000100  \n";  // claims two synsets, lists one
  absl::StatusOr<std::vector<NamedTriple>> triples = Convert();
  ASSERT_FALSE(triples.ok());
  EXPECT_THAT(triples.status().message(), HasSubstr("index.adj:1"));
}

TEST_F(FakeWordNetTest, SynsetTypeFromAnotherFileIsAnError) {
  files_["data.adv"] = "00000100 02 n 01 loudly 0 000 | loudly  \n";
  absl::StatusOr<std::vector<NamedTriple>> triples = Convert();
  ASSERT_FALSE(triples.ok());
  EXPECT_THAT(triples.status().message(), HasSubstr("data.adv:1"));
}

TEST(WordNetTest, MissingDirectoryIsNotFound) {
  absl::StatusOr<std::vector<NamedTriple>> triples =
      ConvertWordNet(::testing::TempDir() + "/no_such_wordnet_dir");
  ASSERT_FALSE(triples.ok());
  EXPECT_EQ(triples.status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace grail
