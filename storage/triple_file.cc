#include "storage/triple_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace grail {

absl::StatusOr<NamedTriple> ParseTripleLine(absl::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  absl::string_view fields[3];
  int count = 0;
  size_t start = 0;
  while (true) {
    size_t tab = line.find('\t', start);
    absl::string_view field =
        line.substr(start, tab == absl::string_view::npos ? absl::string_view::npos : tab - start);
    if (count < 3) fields[count] = field;
    ++count;
    if (tab == absl::string_view::npos) break;
    start = tab + 1;
  }
  if (count != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected 3 tab-separated fields (head, relation, tail), found ", count));
  }
  static constexpr const char* kFieldNames[3] = {"head", "relation", "tail"};
  for (int i = 0; i < 3; ++i) {
    if (fields[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("empty ", kFieldNames[i], " name"));
    }
    if (fields[i].find('\r') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(kFieldNames[i], " name contains a CR"));
    }
  }
  return NamedTriple{std::string(fields[0]), std::string(fields[1]), std::string(fields[2])};
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
