// Chunks whose bytes do not parse: UTF-8 validity and which name is at fault.
#include "server/wire/chunk_parsing.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kg/v1/knowledge_graph.pb.h"
#include "tests/testing/graph_calls.h"

namespace grail {
namespace {

using ::testing::HasSubstr;

TEST(Utf8Test, AcceptsWellFormedAndRefusesEveryKindOfMalformedSequence) {
  for (const char* good :
       {"", "plain", "entit\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf"}) {
    EXPECT_TRUE(IsValidUtf8(good)) << good;
  }
  for (const char* bad : {"\x80", "a\xff", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80",
                          "\xf4\x90\x80\x80", "\xe2\x82", "\xf0\x9f\x98", "\xc3\x28"}) {
    EXPECT_FALSE(IsValidUtf8(bad)) << testing::PrintToString(std::string(bad));
  }
}

TEST(ParseChunkTest, CountsLinesFromFirstLineWhenTheBadNameIsTheLastFieldOfTheChunk) {
  kg::v1::AddTriplesRequest chunk;
  chunk.set_first_line(3);
  for (const char* tail : {"u4", "xBADx"}) {
    kg::v1::Triple* t = chunk.add_triples();
    t->set_head("u3");
    t->set_relation("_hypernym");
    t->set_tail(tail);
  }
  kg::v1::AddTriplesRequest parsed;
  const absl::Status status = ParseChunk(WithInvalidUtf8(chunk), &parsed);
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("line 4: the tail is not valid UTF-8 (fact 1)"));
}

TEST(ParseChunkTest, NamesTheLineAndFieldOfANameThatIsNotUtf8) {
  kg::v1::AddTriplesRequest chunk;
  for (int i = 0; i < 4; ++i) {
    kg::v1::Triple* t = chunk.add_triples();
    t->set_head("h");
    t->set_relation(i == 2 ? "rBAD" : "r");
    t->set_tail("t");
  }
  kg::v1::AddTriplesRequest parsed;
  absl::Status status = ParseChunk(WithInvalidUtf8(chunk), &parsed);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  // Lines count from 1 without first_line.
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("line 3: the relation is not valid UTF-8 (fact 2)"));

  chunk.set_first_line(100);
  status = ParseChunk(WithInvalidUtf8(chunk), &parsed);
  EXPECT_THAT(std::string(status.message()), HasSubstr("line 102: the relation"));

  kg::v1::RemoveTriplesRequest removal;
  removal.add_entities("fine");
  removal.add_entities("BAD");
  kg::v1::RemoveTriplesRequest parsed_removal;
  status = ParseChunk(WithInvalidUtf8(removal), &parsed_removal);
  EXPECT_THAT(std::string(status.message()), HasSubstr("entities[1] is not valid UTF-8"));

  // Relations by name are counted on their own, after entities in the same request.
  removal.mutable_entities(1)->assign("fine too");
  removal.add_relations("r");
  removal.add_relations("r2");
  removal.add_relations("rBAD");
  status = ParseChunk(WithInvalidUtf8(removal), &parsed_removal);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("relations[2] is not valid UTF-8"));

  const std::string garbage = "\x0a\xff\xff\xff";
  grpc::Slice slice(garbage);
  status = ParseChunk(grpc::ByteBuffer(&slice, 1), &parsed);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(status.message()), HasSubstr("not a kg.v1.AddTriplesRequest"));

  // A good chunk parses.
  chunk.mutable_triples(2)->set_relation("r");
  EXPECT_TRUE(ParseChunk(WithInvalidUtf8(chunk), &parsed).ok());
  EXPECT_EQ(parsed.triples_size(), 4);
}

}  // namespace
}  // namespace grail
