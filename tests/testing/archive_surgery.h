// Rewriting a model archive entry by entry, as a damaged or crafted copy would be: the
// result is still a well-formed zip (every CRC-32 recomputed), so only checks that look
// inside the entries can tell. Archives as LibTorch writes them (stored entries, no zip64).
#ifndef GRAIL_TESTS_TESTING_ARCHIVE_SURGERY_H_
#define GRAIL_TESTS_TESTING_ARCHIVE_SURGERY_H_

#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace grail {

struct ArchiveEntry {
  std::string name;
  std::string data;
};

namespace archive_surgery_internal {
inline uint64_t Get(const std::string& b, size_t at, int width) {
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}
// Raw deflate data, inflated to `size` bytes.
inline std::string Inflate(const std::string& data, uint64_t size) {
  std::string out(size, '\0');
  z_stream stream{};
  inflateInit2(&stream, -MAX_WBITS);
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  inflate(&stream, Z_FINISH);
  inflateEnd(&stream);
  return out;
}
inline void Put(std::string* out, uint64_t v, int width) {
  for (int i = 0; i < width; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
}  // namespace archive_surgery_internal

// The entries of the zip file at `path`, in central-directory order, inflated (empty if the
// file is not a zip).
inline std::vector<ArchiveEntry> ReadArchiveEntries(const std::string& path) {
  using archive_surgery_internal::Get;
  using archive_surgery_internal::Inflate;
  std::ifstream in(path, std::ios::binary);
  const std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // Every read bounds-checked: the fuzzer hands this arbitrary bytes.
  auto inside = [&](uint64_t at, uint64_t n) { return at <= b.size() && n <= b.size() - at; };
  std::vector<ArchiveEntry> entries;
  const size_t end = b.rfind(std::string("PK\x05\x06", 4));
  if (end == std::string::npos || !inside(end, 22)) return {};
  uint64_t at = Get(b, end + 16, 4);
  for (uint64_t i = 0, n = Get(b, end + 10, 2); i < n; ++i) {
    if (!inside(at, 46)) return {};
    const uint64_t method = Get(b, at + 10, 2), compressed = Get(b, at + 20, 4);
    const uint64_t size = Get(b, at + 24, 4), name_bytes = Get(b, at + 28, 2);
    const uint64_t local = Get(b, at + 42, 4);
    if (!inside(at + 46, name_bytes) || !inside(local, 30)) return {};
    ArchiveEntry e;
    e.name = b.substr(at + 46, name_bytes);
    const uint64_t data = local + 30 + Get(b, local + 26, 2) + Get(b, local + 28, 2);
    if (!inside(data, compressed) || size > (uint64_t{1} << 30)) return {};
    e.data = method == 8 ? Inflate(b.substr(data, compressed), size) : b.substr(data, compressed);
    entries.push_back(std::move(e));
    at += 46 + name_bytes + Get(b, at + 30, 2) + Get(b, at + 32, 2);
  }
  return entries;
}

// Writes `entries` to `path` as a zip of stored entries with correct CRC-32s, each entry's
// data aligned to 64 bytes as LibTorch aligns tensors.
inline bool WriteArchiveEntries(const std::string& path, const std::vector<ArchiveEntry>& entries) {
  using archive_surgery_internal::Put;
  std::string out, directory;
  for (const ArchiveEntry& e : entries) {
    const uint32_t crc = static_cast<uint32_t>(
        crc32(0, reinterpret_cast<const Bytef*>(e.data.data()), static_cast<uInt>(e.data.size())));
    const size_t local = out.size();
    // Padding in the extra field, so the data starts on a 64-byte boundary.
    const size_t unpadded = local + 30 + e.name.size() + 4;
    const size_t padding = (64 - unpadded % 64) % 64;
    Put(&out, 0x04034b50, 4);
    Put(&out, 20, 2);  // version needed
    Put(&out, 0, 2);   // flags
    Put(&out, 0, 2);   // stored
    Put(&out, 0, 4);   // time, date
    Put(&out, crc, 4);
    Put(&out, e.data.size(), 4);
    Put(&out, e.data.size(), 4);
    Put(&out, e.name.size(), 2);
    Put(&out, 4 + padding, 2);
    out += e.name;
    Put(&out, 0xcafe, 2);  // a private extra field holding the padding
    Put(&out, padding, 2);
    out.append(padding, 'Z');
    out += e.data;
    Put(&directory, 0x02014b50, 4);
    Put(&directory, 20, 2);  // made by
    Put(&directory, 20, 2);  // needed
    Put(&directory, 0, 2);
    Put(&directory, 0, 2);
    Put(&directory, 0, 4);
    Put(&directory, crc, 4);
    Put(&directory, e.data.size(), 4);
    Put(&directory, e.data.size(), 4);
    Put(&directory, e.name.size(), 2);
    Put(&directory, 0, 2);  // extra
    Put(&directory, 0, 2);  // comment
    Put(&directory, 0, 2);  // disk
    Put(&directory, 0, 2);  // internal attributes
    Put(&directory, 0, 4);  // external attributes
    Put(&directory, local, 4);
    directory += e.name;
  }
  const size_t directory_at = out.size();
  out += directory;
  Put(&out, 0x06054b50, 4);
  Put(&out, 0, 4);  // disk numbers
  Put(&out, entries.size(), 2);
  Put(&out, entries.size(), 2);
  Put(&out, directory.size(), 4);
  Put(&out, directory_at, 4);
  Put(&out, 0, 2);  // comment
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  file << out;
  return static_cast<bool>(file);
}

// The entry whose name ends with `suffix` ("data/3", "code/__torch__.py"), or null.
inline ArchiveEntry* FindEntry(std::vector<ArchiveEntry>& entries, const std::string& suffix) {
  for (ArchiveEntry& e : entries) {
    if (e.name.size() >= suffix.size() &&
        e.name.compare(e.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return &e;
    }
  }
  return nullptr;
}

// TorchScript source that makes LibTorch's loader take long (a function of `statements`
// statements, ~10 s per million here) or crash it (an expression nested `depth` deep
// overflows its recursive-descent parser's stack: SIGSEGV).
inline std::string SlowToLoadSource(int statements) {
  std::string source = "\ndef grail_slow(x: int) -> int:\n";
  for (int i = 0; i < statements; ++i) source += "  x = x + 1\n";
  return source + "  return x\n";
}
inline std::string CrashingSource(int depth) {
  return "\ndef grail_deep() -> int:\n  return " + std::string(depth, '(') + "1" +
         std::string(depth, ')') + "\n";
}

// A copy of the archive at `from` at `to` with `source` appended to its TorchScript code.
inline bool WriteWithExtraSource(const std::string& from, const std::string& to,
                                 const std::string& source) {
  std::vector<ArchiveEntry> entries = ReadArchiveEntries(from);
  ArchiveEntry* code = FindEntry(entries, "code/__torch__.py");
  if (code == nullptr) return false;
  code->data += source;
  return WriteArchiveEntries(to, entries);
}

// A copy of the archive at `from` at `to` whose code calls operator `renamed` wherever it
// called `op` ("ops.grail.rspmm"): an archive of a build that has an operator this one lacks.
// False if the code never called `op`.
inline bool WriteWithOperatorRenamed(const std::string& from, const std::string& to,
                                     const std::string& op, const std::string& renamed) {
  std::vector<ArchiveEntry> entries = ReadArchiveEntries(from);
  int calls = 0;
  for (ArchiveEntry& entry : entries) {
    for (size_t at = entry.data.find(op + "("); at != std::string::npos;
         at = entry.data.find(op + "(", at + renamed.size())) {
      entry.data.replace(at, op.size(), renamed);
      ++calls;
    }
  }
  return calls > 0 && WriteArchiveEntries(to, entries);
}

}  // namespace grail

#endif  // GRAIL_TESTS_TESTING_ARCHIVE_SURGERY_H_
