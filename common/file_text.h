// Reads a whole file into a string, for the small files a flag names (certificates, keys,
// token lists): bounded, and only a regular file (a FIFO or /dev/zero named by mistake would
// block or fill memory).
#ifndef GRAIL_COMMON_FILE_TEXT_H_
#define GRAIL_COMMON_FILE_TEXT_H_

#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace grail {

// What a certificate chain, a key or a token list needs, many times over (a CA bundle of
// every public root is about 200 kB).
inline constexpr int64_t kMaxFileTextBytes = int64_t{16} << 20;

// The file's bytes; NOT_FOUND "WHAT PATH: cannot be read" if it cannot be opened (`what`
// names where the path came from, e.g. "--tls-key"), INVALID_ARGUMENT if it is not a regular
// file or holds more than `max_bytes`.
inline absl::StatusOr<std::string> ReadFileText(const std::string& path, absl::string_view what,
                                                int64_t max_bytes = kMaxFileTextBytes) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    return absl::NotFoundError(absl::StrCat(what, " ", path, ": cannot be read"));
  }
  if (!S_ISREG(info.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " ", path, ": not a regular file; give the path of a file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(what, " ", path, ": cannot be read"));
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(text.size()) > max_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", path, ": larger than ", max_bytes,
                                                     " bytes; not a file of this kind"));
    }
  }
  return text;
}

}  // namespace grail

#endif  // GRAIL_COMMON_FILE_TEXT_H_
