// A bijection between names and dense ids, ids assigned in order of first appearance.
//
// Not thread-safe: callers that share a Vocabulary across threads synchronise externally.
#ifndef GRAIL_GRAPH_VOCABULARY_H_
#define GRAIL_GRAPH_VOCABULARY_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace grail {

// A name as error messages quote it: in double quotes, C-escaped, and cut to its first
// `max_bytes` bytes with its length added when longer ("abc…" (20000 bytes)), so that a
// message never grows with a hostile name (gRPC refuses status messages beyond ~8 KiB).
std::string QuoteName(absl::string_view name, size_t max_bytes = 64);

// The one rule for entity and relation names, wherever they come in (triple files, AddTriples,
// the read calls): not empty, at most `max_bytes` bytes, and no TAB, carriage return or line
// feed (they would break the line format names are exported and imported in). Otherwise
// INVALID_ARGUMENT naming `what` ("head name", "triples[2].tail"): "<what> is empty",
// "<what> is N bytes; the limit is M" (followed by " (<limit_flag>)" when given), "<what>
// contains a TAB at byte K".
absl::Status ValidateName(absl::string_view name, absl::string_view what,
                          size_t max_bytes = std::numeric_limits<size_t>::max(),
                          absl::string_view limit_flag = "");

class Vocabulary {
 public:
  Vocabulary() = default;
  // Builds a vocabulary whose id i is names[i]; requires distinct names (a repeated name
  // keeps its first id and shifts every later one).
  explicit Vocabulary(const std::vector<std::string>& names);

  // Returns the id of `name`, assigning the next free id if it is new.
  uint32_t Intern(absl::string_view name);
  // Returns the id of `name`, or nullopt if it has none.
  std::optional<uint32_t> Find(absl::string_view name) const;
  // Requires id < size().
  const std::string& Name(uint32_t id) const { return names_[id]; }
  uint32_t size() const { return static_cast<uint32_t>(names_.size()); }
  // Names in id order.
  const std::vector<std::string>& names() const { return names_; }

 private:
  absl::flat_hash_map<std::string, uint32_t> ids_;
  std::vector<std::string> names_;
};

}  // namespace grail

#endif  // GRAIL_GRAPH_VOCABULARY_H_
