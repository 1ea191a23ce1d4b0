#include "graph/triple_file.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "graph/vocabulary.h"
#include "gtest/gtest.h"
#include "tests/testing/temp_dir.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string WriteTemp(const std::string& name, const std::string& contents) {
  const std::string path = ProcessTempPath(name);
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

TEST(TripleFileTest, ReadsTabSeparatedFacts) {
  const std::string path = WriteTemp("ok.txt", "a\tr1\tb\nb\tr2\tc\n");
  absl::StatusOr<std::vector<NamedTriple>> triples = ReadTripleFile(path);
  ASSERT_TRUE(triples.ok()) << triples.status();
  EXPECT_THAT(*triples, ElementsAre(NamedTriple{"a", "r1", "b"}, NamedTriple{"b", "r2", "c"}));
}

TEST(TripleFileTest, ToleratesCrLfAndBlankLinesAndMissingFinalNewline) {
  const std::string path = WriteTemp("crlf.txt", "a\tr\tb\r\n\r\n\nc\tr\td");
  absl::StatusOr<std::vector<NamedTriple>> triples = ReadTripleFile(path);
  ASSERT_TRUE(triples.ok()) << triples.status();
  EXPECT_THAT(*triples, ElementsAre(NamedTriple{"a", "r", "b"}, NamedTriple{"c", "r", "d"}));
}

TEST(TripleFileTest, NamesKeepSpacesAndUnicode) {
  const std::string path = WriteTemp("names.txt", "New York\tlocated in\tÉtats-Unis\n");
  absl::StatusOr<std::vector<NamedTriple>> triples = ReadTripleFile(path);
  ASSERT_TRUE(triples.ok()) << triples.status();
  EXPECT_THAT(*triples, ElementsAre(NamedTriple{"New York", "located in", "États-Unis"}));
}

TEST(TripleFileTest, WrongArityNamesFileAndLine) {
  const std::string path = WriteTemp("arity.txt", "a\tr\tb\nc\tr\n");
  absl::StatusOr<std::vector<NamedTriple>> triples = ReadTripleFile(path);
  ASSERT_FALSE(triples.ok());
  EXPECT_EQ(triples.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(triples.status().message(), HasSubstr(path + ":2:"));
  EXPECT_THAT(triples.status().message(), HasSubstr("found 2"));
}

TEST(TripleFileTest, TooManyFieldsIsAnError) {
  absl::StatusOr<NamedTriple> t = ParseTripleLine("a\tr\tb\tc");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("found 4"));
}

TEST(TripleFileTest, EmptyNameIsAnErrorNamingTheField) {
  absl::StatusOr<NamedTriple> t = ParseTripleLine("a\t\tb");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("relation name is empty"));
  EXPECT_THAT(ParseTripleLine("\tr\tb").status().message(), HasSubstr("head name is empty"));
  EXPECT_THAT(ParseTripleLine("a\tr\t").status().message(), HasSubstr("tail name is empty"));
}

TEST(TripleFileTest, NamesFollowTheStoresRule) {
  EXPECT_THAT(ParseTripleLine("a\rb\tr\tc").status().message(),
              HasSubstr("head name contains a carriage return at byte 1"));
  EXPECT_TRUE(ParseTripleLine("a b\tr\tc\r").ok());  // spaces are fine; a line's CR is not a name's
}

TEST(NameRuleTest, OneRuleWithMessagesNamingTheField) {
  EXPECT_TRUE(ValidateName("entité 42", "head").ok());
  EXPECT_EQ(ValidateName("", "head").message(), "head is empty");
  EXPECT_EQ(ValidateName("abcdef", "triples[2].tail", 4).message(),
            "triples[2].tail is 6 bytes; the limit is 4");
  EXPECT_EQ(ValidateName("abcdef", "tail", 4, "--max-name-bytes").message(),
            "tail is 6 bytes; the limit is 4 (--max-name-bytes)");
  EXPECT_EQ(ValidateName("ab\tc", "head name").message(), "head name contains a TAB at byte 2");
  EXPECT_EQ(ValidateName("\nx", "r").message(), "r contains a line feed at byte 0");
  EXPECT_EQ(ValidateName("x\r", "r").code(), absl::StatusCode::kInvalidArgument);
}

TEST(TripleFileTest, MissingFileIsNotFound) {
  absl::StatusOr<std::vector<NamedTriple>> triples = ReadTripleFile("/nonexistent/file.txt");
  EXPECT_EQ(triples.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(triples.status().message(), HasSubstr("/nonexistent/file.txt"));
}

TEST(TripleFileTest, WriteThenReadRoundTrips) {
  const std::vector<NamedTriple> facts = {{"x", "likes", "y"}, {"y", "likes", "z z"}};
  const std::string path = ProcessTempPath("rt.txt");
  ASSERT_TRUE(WriteTripleFile(path, facts).ok());
  absl::StatusOr<std::vector<NamedTriple>> back = ReadTripleFile(path);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, facts);
}

TEST(TripleFileTest, IndexTriplesAssignsIdsInOrderOfFirstAppearance) {
  IndexedTriples indexed;
  IndexTriples({{"b", "r", "a"}, {"a", "s", "c"}, {"b", "r", "c"}}, &indexed);
  EXPECT_THAT(indexed.entities.names(), ElementsAre("b", "a", "c"));
  EXPECT_THAT(indexed.relations.names(), ElementsAre("r", "s"));
  EXPECT_THAT(indexed.triples, ElementsAre(Triple{0, 0, 1}, Triple{1, 1, 2}, Triple{0, 0, 2}));
  EXPECT_EQ(NameTriples(indexed.triples, indexed.entities, indexed.relations)[1],
            (NamedTriple{"a", "s", "c"}));
}

TEST(VocabularyTest, InternIsIdempotentAndFindDoesNotInsert) {
  Vocabulary v;
  EXPECT_EQ(v.Intern("x"), 0u);
  EXPECT_EQ(v.Intern("y"), 1u);
  EXPECT_EQ(v.Intern("x"), 0u);
  EXPECT_EQ(v.Find("y"), 1u);
  EXPECT_EQ(v.Find("z"), std::nullopt);
  EXPECT_EQ(v.size(), 2u);
  EXPECT_EQ(v.Name(1), "y");
}

}  // namespace
}  // namespace grail
