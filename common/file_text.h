// Reads a whole file into a string, for the small files a flag names (certificates, keys).
#ifndef GRAIL_COMMON_FILE_TEXT_H_
#define GRAIL_COMMON_FILE_TEXT_H_

#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace grail {

// The file's bytes; NOT_FOUND "WHAT PATH: cannot be read" if it cannot be opened (`what`
// names where the path came from, e.g. "--tls-key").
inline absl::StatusOr<std::string> ReadFileText(const std::string& path, absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(what, " ", path, ": cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace grail

#endif  // GRAIL_COMMON_FILE_TEXT_H_
