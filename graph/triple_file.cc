#include "graph/triple_file.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/triple_line.h"
#include "graph/vocabulary.h"

namespace grail {

absl::StatusOr<NamedTriple> ParseTripleLine(absl::string_view line) {
  absl::StatusOr<std::array<absl::string_view, 3>> fields = SplitTripleFields(line);
  if (!fields.ok()) return fields.status();
  static constexpr const char* kFieldNames[3] = {"head name", "relation name", "tail name"};
  for (int i = 0; i < 3; ++i) {
    if (absl::Status valid = ValidateName((*fields)[i], kFieldNames[i]); !valid.ok()) return valid;
  }
  return NamedTriple{std::string((*fields)[0]), std::string((*fields)[1]),
                     std::string((*fields)[2])};
}

absl::StatusOr<std::vector<NamedTriple>> ReadTripleFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  std::vector<NamedTriple> triples;
  std::string line;
  for (int64_t line_number = 1; std::getline(in, line); ++line_number) {
    if (line.empty() || line == "\r") continue;
    absl::StatusOr<NamedTriple> triple = ParseTripleLine(line);
    if (!triple.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": ", triple.status().message()));
    }
    triples.push_back(*std::move(triple));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  return triples;
}

absl::Status WriteTripleFile(const std::string& path, absl::Span<const NamedTriple> triples) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
  }
  for (const NamedTriple& t : triples) {
    out << t.head << '\t' << t.relation << '\t' << t.tail << '\n';
  }
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

void IndexTriples(absl::Span<const NamedTriple> named, IndexedTriples* out) {
  out->triples.reserve(out->triples.size() + named.size());
  for (const NamedTriple& t : named) {
    Triple triple;
    triple.head = out->entities.Intern(t.head);
    triple.relation = out->relations.Intern(t.relation);
    triple.tail = out->entities.Intern(t.tail);
    out->triples.push_back(triple);
  }
}

std::vector<NamedTriple> NameTriples(absl::Span<const Triple> triples, const Vocabulary& entities,
                                     const Vocabulary& relations) {
  std::vector<NamedTriple> named;
  named.reserve(triples.size());
  for (const Triple& t : triples) {
    named.push_back({entities.Name(t.head), relations.Name(t.relation), entities.Name(t.tail)});
  }
  return named;
}

}  // namespace grail
