// The line format of triple files, read by the trainer, the tools, the store's loaders and
// the client's uploads: head<TAB>relation<TAB>tail, one fact per line. A trailing carriage
// return (a file written on Windows) is not part of the tail.
#ifndef GRAIL_COMMON_TRIPLE_LINE_H_
#define GRAIL_COMMON_TRIPLE_LINE_H_

#include <array>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace grail {

// The three fields of `line` (views into it), or INVALID_ARGUMENT "expected 3 tab-separated
// fields (head, relation, tail), found N". Only the shape is checked: whether a field is a
// valid name is ValidateName's question (graph/vocabulary.h).
inline absl::StatusOr<std::array<absl::string_view, 3>> SplitTripleFields(absl::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  std::array<absl::string_view, 3> fields;
  int count = 0;
  size_t start = 0;
  while (true) {
    const size_t tab = line.find('\t', start);
    if (count < 3) {
      fields[count] = line.substr(start, tab == absl::string_view::npos ? tab : tab - start);
    }
    ++count;
    if (tab == absl::string_view::npos) break;
    start = tab + 1;
  }
  if (count != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected 3 tab-separated fields (head, relation, tail), found ", count));
  }
  return fields;
}

}  // namespace grail

#endif  // GRAIL_COMMON_TRIPLE_LINE_H_
