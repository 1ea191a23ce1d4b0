#include "client/triple_source.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/triple_line.h"

namespace grail {
namespace {

bool IsBlank(absl::string_view line) { return line.empty() || line == "\r"; }

absl::string_view DropCarriageReturn(absl::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

absl::StatusOr<std::unique_ptr<std::istream>> OpenFile(const std::string& path) {
  auto in = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!*in) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  return in;
}

}  // namespace

absl::StatusOr<SourceTriple> SplitTripleLine(absl::string_view line) {
  absl::StatusOr<std::array<absl::string_view, 3>> fields = SplitTripleFields(line);
  if (!fields.ok()) return fields.status();
  return SourceTriple{std::string((*fields)[0]), std::string((*fields)[1]),
                      std::string((*fields)[2])};
}

absl::StatusOr<std::unique_ptr<TripleChunkReader>> TripleChunkReader::Open(const std::string& path,
                                                                           size_t chunk_size) {
  absl::StatusOr<std::unique_ptr<std::istream>> in = OpenFile(path);
  if (!in.ok()) return in.status();
  return std::make_unique<TripleChunkReader>(path, *std::move(in), chunk_size);
}

TripleChunkReader::TripleChunkReader(std::string name, std::unique_ptr<std::istream> in,
                                     size_t chunk_size)
    : name_(std::move(name)), in_(std::move(in)), chunk_size_(chunk_size < 1 ? 1 : chunk_size) {}

absl::StatusOr<bool> TripleChunkReader::Next(TripleChunk* chunk) {
  chunk->triples.clear();
  chunk->first_line = 0;
  if (!error_.ok()) return error_;
  std::string line;
  while (chunk->triples.size() < chunk_size_ && std::getline(*in_, line)) {
    ++line_number_;
    if (IsBlank(line)) {
      // Keeps each chunk's lines consecutive (see the header).
      if (!chunk->triples.empty()) break;
      continue;
    }
    absl::StatusOr<SourceTriple> triple = SplitTripleLine(line);
    if (!triple.ok()) {
      error_ = absl::InvalidArgumentError(
          absl::StrCat(name_, ":", line_number_, ": ", triple.status().message()));
      chunk->triples.clear();
      chunk->first_line = 0;
      return error_;
    }
    if (chunk->triples.empty()) chunk->first_line = line_number_;
    chunk->triples.push_back(*std::move(triple));
  }
  if (in_->bad()) {
    error_ = absl::DataLossError(absl::StrCat("error reading ", name_));
    chunk->triples.clear();
    chunk->first_line = 0;
    return error_;
  }
  return !chunk->triples.empty();
}

absl::StatusOr<std::vector<SourceTriple>> ReadAllTriples(const std::string& path) {
  absl::StatusOr<std::unique_ptr<TripleChunkReader>> reader =
      TripleChunkReader::Open(path, 1 << 16);
  if (!reader.ok()) return reader.status();
  std::vector<SourceTriple> triples;
  TripleChunk chunk;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&chunk);
    if (!more.ok()) return more.status();
    if (!*more) break;
    for (SourceTriple& t : chunk.triples) triples.push_back(std::move(t));
  }
  return triples;
}

absl::StatusOr<std::vector<std::string>> ReadNameList(const std::string& path) {
  absl::StatusOr<std::unique_ptr<std::istream>> in = OpenFile(path);
  if (!in.ok()) return in.status();
  std::vector<std::string> names;
  std::string line;
  for (uint64_t line_number = 1; std::getline(**in, line); ++line_number) {
    if (IsBlank(line)) continue;
    absl::string_view name = DropCarriageReturn(line);
    if (name.find('\t') != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", line_number, ": expected one name per line, found a TAB"));
    }
    names.emplace_back(name);
  }
  if ((*in)->bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  return names;
}

}  // namespace grail
