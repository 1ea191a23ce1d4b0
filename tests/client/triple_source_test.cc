#include "client/triple_source.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/client/client_test_files.h"

namespace grail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TripleChunkReader ReaderOf(const std::string& text, size_t chunk_size) {
  return TripleChunkReader("facts.tsv", std::make_unique<std::istringstream>(text), chunk_size);
}

// (first_line, size) of every chunk, reading to the end; fails the test on an error.
std::vector<std::pair<uint64_t, size_t>> ChunkShapes(TripleChunkReader& reader) {
  std::vector<std::pair<uint64_t, size_t>> shapes;
  TripleChunk chunk;
  while (true) {
    absl::StatusOr<bool> more = reader.Next(&chunk);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    shapes.emplace_back(chunk.first_line, chunk.triples.size());
  }
  return shapes;
}

std::string Lines(int n) {
  std::string text;
  for (int i = 1; i <= n; ++i)
    text += "h" + std::to_string(i) + "\tr\tt" + std::to_string(i) + "\n";
  return text;
}

TEST(TripleChunkReaderTest, ChunksHoldAtMostChunkSizeFactsAndStartAtTheirFirstLine) {
  TripleChunkReader reader = ReaderOf(Lines(7), 3);
  EXPECT_THAT(ChunkShapes(reader),
              ElementsAre(std::pair<uint64_t, size_t>{1, 3}, std::pair<uint64_t, size_t>{4, 3},
                          std::pair<uint64_t, size_t>{7, 1}));
}

TEST(TripleChunkReaderTest, ExactMultipleOfChunkSizeEndsWithoutAnEmptyChunk) {
  TripleChunkReader reader = ReaderOf(Lines(6), 3);
  EXPECT_THAT(ChunkShapes(reader),
              ElementsAre(std::pair<uint64_t, size_t>{1, 3}, std::pair<uint64_t, size_t>{4, 3}));
}

TEST(TripleChunkReaderTest, TriplesKeepFileOrderAndFields) {
  TripleChunkReader reader = ReaderOf("a\tlikes\tb\nc\thates\td\n", 10);
  TripleChunk chunk;
  ASSERT_TRUE(*reader.Next(&chunk));
  EXPECT_THAT(chunk.triples,
              ElementsAre(SourceTriple{"a", "likes", "b"}, SourceTriple{"c", "hates", "d"}));
  EXPECT_EQ(chunk.first_line, 1u);
  EXPECT_EQ(chunk.last_line(), 2u);
  EXPECT_FALSE(*reader.Next(&chunk));
}

TEST(TripleChunkReaderTest, BlankLinesAreSkippedAndEndTheChunkSoItsLinesStayConsecutive) {
  // Line numbers: 1 blank, 2 a, 3 b, 4 blank, 5 blank (CR only), 6 c, 7 d, 8 blank.
  TripleChunkReader reader = ReaderOf("\na\tr\tb\nb\tr\tc\n\n\r\nc\tr\td\nd\tr\te\n\n", 10);
  TripleChunk chunk;
  ASSERT_TRUE(*reader.Next(&chunk));
  EXPECT_EQ(chunk.first_line, 2u);
  EXPECT_EQ(chunk.last_line(), 3u);
  ASSERT_TRUE(*reader.Next(&chunk));
  EXPECT_EQ(chunk.first_line, 6u);
  EXPECT_EQ(chunk.last_line(), 7u);
  EXPECT_THAT(chunk.triples, ElementsAre(SourceTriple{"c", "r", "d"}, SourceTriple{"d", "r", "e"}));
  EXPECT_FALSE(*reader.Next(&chunk));
}

TEST(TripleChunkReaderTest, CarriageReturnsAreDroppedAndALastLineNeedsNoNewline) {
  TripleChunkReader reader = ReaderOf("a\tr\tb\r\nc\tr\td", 10);
  TripleChunk chunk;
  ASSERT_TRUE(*reader.Next(&chunk));
  EXPECT_THAT(chunk.triples, ElementsAre(SourceTriple{"a", "r", "b"}, SourceTriple{"c", "r", "d"}));
}

TEST(TripleChunkReaderTest, WrongArityNamesTheSourceAndLineAndReturnsNothingOfTheChunk) {
  // Chunk 1 is lines 1-2; chunk 2 would be lines 3-4, and line 4 has two fields.
  TripleChunkReader reader = ReaderOf("a\tr\tb\nb\tr\tc\nc\tr\td\nd\tr\n", 2);
  TripleChunk chunk;
  ASSERT_TRUE(*reader.Next(&chunk));
  absl::StatusOr<bool> more = reader.Next(&chunk);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(more.status().message(), HasSubstr("facts.tsv:4:"));
  EXPECT_THAT(more.status().message(), HasSubstr("found 2"));
  EXPECT_TRUE(chunk.triples.empty());
  EXPECT_FALSE(reader.Next(&chunk).ok()) << "errors are sticky";
}

TEST(TripleChunkReaderTest, TooManyFieldsIsAnErrorToo) {
  TripleChunkReader reader = ReaderOf("a\tr\tb\tx\n", 5);
  TripleChunk chunk;
  absl::StatusOr<bool> more = reader.Next(&chunk);
  ASSERT_FALSE(more.ok());
  EXPECT_THAT(more.status().message(), HasSubstr("facts.tsv:1: expected 3 tab-separated"));
  EXPECT_THAT(more.status().message(), HasSubstr("found 4"));
}

TEST(TripleChunkReaderTest, EmptyNamesAreLeftToTheServer) {
  absl::StatusOr<SourceTriple> triple = SplitTripleLine("a\t\tb");
  ASSERT_TRUE(triple.ok());
  EXPECT_EQ(*triple, (SourceTriple{"a", "", "b"}));
}

TEST(TripleChunkReaderTest, MissingFileIsNotFound) {
  absl::StatusOr<std::unique_ptr<TripleChunkReader>> reader =
      TripleChunkReader::Open("/nonexistent/facts.tsv", 10);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), absl::StatusCode::kNotFound);
}

TEST(ReadAllTriplesTest, ReadsAFileAcrossChunkBoundaries) {
  const std::string path = WriteTestFile("all_triples.tsv", Lines(70000) + "\nx\tr\ty\n");
  absl::StatusOr<std::vector<SourceTriple>> triples = ReadAllTriples(path);
  ASSERT_TRUE(triples.ok()) << triples.status();
  ASSERT_EQ(triples->size(), 70001u);
  EXPECT_EQ((*triples)[69999], (SourceTriple{"h70000", "r", "t70000"}));
  EXPECT_EQ(triples->back(), (SourceTriple{"x", "r", "y"}));
}

TEST(ReadNameListTest, OneNamePerLineBlankLinesSkippedCrDropped) {
  const std::string path = WriteTestFile("names.txt", "alice\r\n\nbob carol\n");
  absl::StatusOr<std::vector<std::string>> names = ReadNameList(path);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ElementsAre("alice", "bob carol"));
}

TEST(ReadNameListTest, ATabNamesTheLine) {
  const std::string path = WriteTestFile("names_with_tab.txt", "alice\n\na\tr\tb\n");
  absl::StatusOr<std::vector<std::string>> names = ReadNameList(path);
  ASSERT_FALSE(names.ok());
  EXPECT_THAT(names.status().message(), HasSubstr("names_with_tab.txt:3:"));
}

}  // namespace
}  // namespace grail
