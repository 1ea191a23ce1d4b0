// Reading the client's input files: triple files (`head<TAB>relation<TAB>tail` per line) in
// chunks that remember their line numbers, and name lists (one name per line).
//
// The client checks only the shape of a line (exactly three tab-separated fields); whether
// a name is acceptable (non-empty, short enough, a known relation) is the server's call, and
// the server names the offending line from the chunk's `first_line`. For that to be right,
// the lines of one chunk must be consecutive: a blank line ends the chunk being read, so the
// next triple starts a new chunk. Blank lines are otherwise skipped; a trailing CR (files
// written on Windows) is removed from every line.
#ifndef GRAIL_CLIENT_TRIPLE_SOURCE_H_
#define GRAIL_CLIENT_TRIPLE_SOURCE_H_

#include <cstdint>
#include <istream>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grail {

struct SourceTriple {
  std::string head;
  std::string relation;
  std::string tail;

  friend bool operator==(const SourceTriple& a, const SourceTriple& b) {
    return a.head == b.head && a.relation == b.relation && a.tail == b.tail;
  }
};

// Triples from consecutive lines of one source: triples[i] is on line first_line + i.
struct TripleChunk {
  uint64_t first_line = 0;  // 1-based
  std::vector<SourceTriple> triples;

  // Line of the last triple (first_line - 1 when empty).
  uint64_t last_line() const { return first_line + triples.size() - 1; }
};

// Splits one line (without its LF; a trailing CR is dropped) into its three fields. Errors:
// INVALID_ARGUMENT saying how many fields were found, without a location.
absl::StatusOr<SourceTriple> SplitTripleLine(absl::string_view line);

// Reads a triple source chunk by chunk. Not thread-safe; one reader per source.
class TripleChunkReader {
 public:
  // Opens `path`. Errors: NOT_FOUND if it cannot be opened. `chunk_size` >= 1.
  static absl::StatusOr<std::unique_ptr<TripleChunkReader>> Open(const std::string& path,
                                                                 size_t chunk_size);

  // Reads from `in`; `name` is what error messages call the source.
  TripleChunkReader(std::string name, std::unique_ptr<std::istream> in, size_t chunk_size);

  TripleChunkReader(const TripleChunkReader&) = delete;
  TripleChunkReader& operator=(const TripleChunkReader&) = delete;

  // Fills `chunk` with the next at most chunk_size triples and returns true, or returns false
  // at the end of the source. Errors: INVALID_ARGUMENT `name:line: ...` for a malformed line
  // (nothing of the chunk being read is returned; later calls keep failing), DATA_LOSS for
  // a read error.
  absl::StatusOr<bool> Next(TripleChunk* chunk);

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::unique_ptr<std::istream> in_;
  size_t chunk_size_;
  uint64_t line_number_ = 0;  // of the last line read
  absl::Status error_;        // sticky
};

// Every triple of the file at `path` (same rules as TripleChunkReader).
absl::StatusOr<std::vector<SourceTriple>> ReadAllTriples(const std::string& path);

// Names from `path`, one per line, in file order; blank lines skipped, a trailing CR
// dropped. Errors: NOT_FOUND if it cannot be opened; INVALID_ARGUMENT naming the line if a
// line contains a TAB (a triple file passed by mistake).
absl::StatusOr<std::vector<std::string>> ReadNameList(const std::string& path);

}  // namespace grail

#endif  // GRAIL_CLIENT_TRIPLE_SOURCE_H_
