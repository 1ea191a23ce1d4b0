// A JSON object written field by field, for the client's machine-readable output.
//
// Numbers are written so that scripts read back what the server sent: integers in full
// (never as strings, unlike proto3 JSON for 64-bit fields), floats in the shortest form
// that parses back to the same float. Non-finite numbers, which JSON cannot express,
// become null.
#ifndef GRAIL_CLIENT_JSON_OBJECT_H_
#define GRAIL_CLIENT_JSON_OBJECT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace grail {

// `value` as a JSON string literal, quotes included.
std::string JsonString(absl::string_view value);

// The shortest decimal text that reads back as `value` (e.g. "0.1", "-3.25", "1e-07"); also
// the client's plain-text format for scores, so text and JSON outputs agree digit for digit.
std::string FormatFloat(float value);

class JsonObject {
 public:
  JsonObject& Add(absl::string_view key, absl::string_view value);
  JsonObject& Add(absl::string_view key, const char* value) {
    return Add(key, absl::string_view(value));
  }
  JsonObject& Add(absl::string_view key, bool value);
  JsonObject& Add(absl::string_view key, int64_t value);
  JsonObject& Add(absl::string_view key, uint64_t value);
  JsonObject& Add(absl::string_view key, int value) { return Add(key, int64_t{value}); }
  JsonObject& Add(absl::string_view key, uint32_t value) { return Add(key, uint64_t{value}); }
  JsonObject& Add(absl::string_view key, float value);
  JsonObject& Add(absl::string_view key, double value);
  // `json` is already JSON text (an object, an array, ...).
  JsonObject& AddRaw(absl::string_view key, absl::string_view json);
  JsonObject& Add(absl::string_view key, const JsonObject& value) {
    return AddRaw(key, value.str());
  }
  JsonObject& AddStrings(absl::string_view key, absl::Span<const std::string> values);

  // The object's text, on one line.
  std::string str() const { return "{" + body_ + "}"; }

 private:
  void Key(absl::string_view key);

  std::string body_;
};

// `elements` (each already JSON) as a JSON array.
std::string JsonArray(absl::Span<const std::string> elements);

}  // namespace grail

#endif  // GRAIL_CLIENT_JSON_OBJECT_H_
