#include "client/json_object.h"

#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace grail {

std::string JsonString(absl::string_view value) {
  std::string out = "\"";
  for (const char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

std::string FormatFloat(float value) {
  if (!std::isfinite(value)) return std::isnan(value) ? "nan" : (value > 0 ? "inf" : "-inf");
  char buffer[32];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

void JsonObject::Key(absl::string_view key) {
  if (!body_.empty()) body_ += ',';
  absl::StrAppend(&body_, JsonString(key), ":");
}

JsonObject& JsonObject::Add(absl::string_view key, absl::string_view value) {
  Key(key);
  body_ += JsonString(value);
  return *this;
}

JsonObject& JsonObject::Add(absl::string_view key, bool value) {
  Key(key);
  body_ += value ? "true" : "false";
  return *this;
}

JsonObject& JsonObject::Add(absl::string_view key, int64_t value) {
  Key(key);
  absl::StrAppend(&body_, value);
  return *this;
}

JsonObject& JsonObject::Add(absl::string_view key, uint64_t value) {
  Key(key);
  absl::StrAppend(&body_, value);
  return *this;
}

JsonObject& JsonObject::Add(absl::string_view key, float value) {
  Key(key);
  body_ += std::isfinite(value) ? FormatFloat(value) : "null";
  return *this;
}

JsonObject& JsonObject::Add(absl::string_view key, double value) {
  Key(key);
  if (!std::isfinite(value)) {
    body_ += "null";
  } else {
    char buffer[32];
    const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
    body_.append(buffer, result.ptr);
  }
  return *this;
}

JsonObject& JsonObject::AddRaw(absl::string_view key, absl::string_view json) {
  Key(key);
  body_.append(json.data(), json.size());
  return *this;
}

JsonObject& JsonObject::AddStrings(absl::string_view key, absl::Span<const std::string> values) {
  Key(key);
  body_ += '[';
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) body_ += ',';
    body_ += JsonString(values[i]);
  }
  body_ += ']';
  return *this;
}

std::string JsonArray(absl::Span<const std::string> elements) {
  return absl::StrCat("[", absl::StrJoin(elements, ","), "]");
}

}  // namespace grail
