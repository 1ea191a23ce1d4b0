// Writing JSON text: our tools print one JSON object per result, and names are arbitrary
// UTF-8, so every string goes through proper escaping.
#ifndef GRAIL_MODEL_JSON_TEXT_H_
#define GRAIL_MODEL_JSON_TEXT_H_

#include <string>

#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace grail {

// Appends `text` as a quoted JSON string (RFC 8259 escapes; bytes >= 0x80 pass through,
// so valid UTF-8 stays valid).
inline void AppendJsonString(std::string* out, absl::string_view text) {
  out->push_back('"');
  for (char c : text) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<unsigned char>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

}  // namespace grail

#endif  // GRAIL_MODEL_JSON_TEXT_H_
