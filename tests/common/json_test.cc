// common/json.h: what the binaries' JSON output promises (integers in full, scores with the
// same digits as the text output, keys in order, no exception on bytes that are not UTF-8).
#include "common/json.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "gtest/gtest.h"

namespace grail {
namespace {

TEST(JsonTest, IntegersStayIntegersInFull) {
  EXPECT_EQ(JsonLine({{"facts", uint64_t{18446744073709551615u}}, {"delta", int64_t{-7}}}),
            "{\"facts\":18446744073709551615,\"delta\":-7}");
}

TEST(JsonTest, KeysKeepTheOrderTheyWereAddedIn) {
  Json json = {{"tail", "b"}, {"head", "a"}};
  json["relation"] = "r";
  EXPECT_EQ(JsonLine(json), "{\"tail\":\"b\",\"head\":\"a\",\"relation\":\"r\"}");
}

TEST(JsonTest, FloatsPrintTheDigitsOfTheTextOutput) {
  for (float value : {0.1f, -3.25f, 1e-7f, 0.8500001f, 123456.79f,
                      std::numeric_limits<float>::min(), std::numeric_limits<float>::max()}) {
    EXPECT_EQ(JsonLine(JsonFloat(value)), FormatFloat(value)) << value;
  }
  EXPECT_EQ(FormatFloat(0.1f), "0.1");
  // A whole number stays a JSON float.
  EXPECT_EQ(JsonLine(JsonFloat(2.0f)), "2.0");
  EXPECT_EQ(FormatFloat(2.0f), "2");
  // A float stored as is would show its binary expansion.
  EXPECT_NE(JsonLine(Json(0.1f)), "0.1");
}

TEST(JsonTest, NonFiniteNumbersAreNull) {
  EXPECT_EQ(JsonLine(JsonFloat(std::nanf(""))), "null");
  EXPECT_EQ(JsonLine(JsonFloat(std::numeric_limits<float>::infinity())), "null");
  EXPECT_EQ(JsonLine(Json(std::nan(""))), "null");
  EXPECT_EQ(FormatFloat(-std::numeric_limits<float>::infinity()), "-inf");
}

TEST(JsonTest, StringsAreEscapedAndBadUtf8IsReplacedNotThrown) {
  EXPECT_EQ(JsonLine({{"name", "a\"b\\c\n\x01é"}}), "{\"name\":\"a\\\"b\\\\c\\n\\u0001é\"}");
  EXPECT_EQ(JsonLine({{"name",
                       "x\xff"
                       "y"}}),
            "{\"name\":\"x\xef\xbf\xbdy\"}");
}

TEST(JsonTest, RoundToKeepsReportsShort) {
  EXPECT_EQ(JsonLine(RoundTo(0.123456789, 6)), "0.123457");
  EXPECT_EQ(JsonLine(RoundTo(2.5e-7, 3)), "0.0");
}

}  // namespace
}  // namespace grail
