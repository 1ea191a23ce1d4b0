// A bijection between names and dense ids, ids assigned in order of first appearance.
//
// Not thread-safe: callers that share a Vocabulary across threads synchronise externally.
#ifndef GRAIL_STORAGE_VOCABULARY_H_
#define GRAIL_STORAGE_VOCABULARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"

namespace grail {

// A name as error messages quote it: in double quotes, C-escaped, and cut to its first
// `max_bytes` bytes with its length added when longer ("abc…" (20000 bytes)), so that a
// message never grows with a hostile name (gRPC refuses status messages beyond ~8 KiB).
std::string QuoteName(absl::string_view name, size_t max_bytes = 64);

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

#endif  // GRAIL_STORAGE_VOCABULARY_H_
