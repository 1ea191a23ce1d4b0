// Triple files: UTF-8 text, one fact per line, `head<TAB>relation<TAB>tail`.
//
// This is the format of the GraIL benchmark splits and of everything our tools write.
// Names are opaque: any bytes except TAB, CR and LF, and never empty. A trailing CR (files
// written on Windows) is tolerated; blank lines are skipped.
#ifndef GRAIL_GRAPH_TRIPLE_FILE_H_
#define GRAIL_GRAPH_TRIPLE_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "graph/ids.h"
#include "graph/vocabulary.h"

namespace grail {

struct NamedTriple {
  std::string head;
  std::string relation;
  std::string tail;

  friend bool operator==(const NamedTriple& a, const NamedTriple& b) {
    return a.head == b.head && a.relation == b.relation && a.tail == b.tail;
  }
};

// Parses one line (without its LF). On failure the message says why, without a location;
// callers prefix `file:line: `.
absl::StatusOr<NamedTriple> ParseTripleLine(absl::string_view line);

// Reads a whole triple file. Errors: NOT_FOUND if it cannot be opened; INVALID_ARGUMENT
// naming `path:line` and the reason for the first malformed line.
absl::StatusOr<std::vector<NamedTriple>> ReadTripleFile(const std::string& path);

// Writes `triples` to `path` (replacing it), one per line.
absl::Status WriteTripleFile(const std::string& path, absl::Span<const NamedTriple> triples);

// Facts by id with the vocabularies that name them.
struct IndexedTriples {
  Vocabulary entities;
  Vocabulary relations;
  std::vector<Triple> triples;
};

// Appends `named` to `out`, interning names into its vocabularies in order of appearance.
void IndexTriples(absl::Span<const NamedTriple> named, IndexedTriples* out);

// Inverse of IndexTriples for a list of facts.
std::vector<NamedTriple> NameTriples(absl::Span<const Triple> triples, const Vocabulary& entities,
                                     const Vocabulary& relations);

}  // namespace grail

#endif  // GRAIL_GRAPH_TRIPLE_FILE_H_
