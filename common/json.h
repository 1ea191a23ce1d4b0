// JSON in every binary, on nlohmann-json (Debian's nlohmann-json3-dev): the client's --json
// output, the server's log lines and ready file, grail-eval's result, grail-tools' subgraphs.
//
//   Json line = {{"head", "a"}, {"score", JsonFloat(0.25f)}, {"known_fact", true}};
//   std::puts(JsonLine(line).c_str());  // {"head":"a","score":0.25,"known_fact":true}
//
// Integers stay integers in full (a uint64 never turns into a string or a rounded double),
// objects keep their keys in the order they were added.
#ifndef GRAIL_COMMON_JSON_H_
#define GRAIL_COMMON_JSON_H_

#include <string>

#include "nlohmann/json.hpp"

namespace grail {

// Objects keep insertion order: fields read in the order a person expects.
using Json = nlohmann::ordered_json;

// `value` as one line of JSON text. Strings that are not valid UTF-8 (entity names are bytes
// to the store) have each bad byte replaced by U+FFFD instead of failing; NaN and infinities,
// which JSON cannot express, become null.
std::string JsonLine(const Json& value);

// The shortest decimal text that reads back as `value` (e.g. "0.1", "-3.25", "1e-07"; "nan",
// "inf", "-inf"): the plain-text form of scores, so text and JSON outputs agree digit for digit.
std::string FormatFloat(float value);

// `value` as a JSON number with FormatFloat's digits (a whole number gains ".0"): the double
// nearest to that decimal, which JSON text writes back as the same shortest digits. A float stored
// in a Json as is would print its binary expansion (0.1f as 0.10000000149011612). Non-finite: null.
Json JsonFloat(float value);

// `value` rounded to `decimals` decimal places, for reports of fractions and seconds.
double RoundTo(double value, int decimals);

}  // namespace grail

#endif  // GRAIL_COMMON_JSON_H_
