#include "model/core/archive_check.h"

#include <zlib.h>

#include <cctype>
#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/core/pickle.h"

namespace grail {
namespace {

constexpr uint32_t kEndOfCentralDirectory = 0x06054b50;
constexpr uint32_t kZip64EndOfCentralDirectory = 0x06064b50;
constexpr uint32_t kZip64Locator = 0x07064b50;
constexpr uint32_t kCentralHeader = 0x02014b50;
constexpr uint32_t kLocalHeader = 0x04034b50;
// General purpose flags no TorchScript archive has: encrypted, patch data, strong encryption.
constexpr uint64_t kUnsupportedFlags = 0x1 | 0x20 | 0x40;
constexpr size_t kEndRecordBytes = 22;
constexpr size_t kZip64EndRecordBytes = 56;
constexpr size_t kZip64LocatorBytes = 20;
constexpr size_t kMaxCommentBytes = 0xffff;

// Little-endian reads at an offset, failing (nullopt) past the end of the bytes.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : bytes_(bytes) {}
  std::optional<uint64_t> Read(uint64_t offset, int width) const {
    if (offset > bytes_.size() || bytes_.size() - offset < static_cast<uint64_t>(width)) {
      return std::nullopt;
    }
    uint64_t value = 0;
    for (int i = width - 1; i >= 0; --i) {
      value = (value << 8) | static_cast<unsigned char>(bytes_[offset + i]);
    }
    return value;
  }
  // The `size` bytes at `offset`, or nullopt if they are not all inside.
  std::optional<absl::string_view> Slice(uint64_t offset, uint64_t size) const {
    if (offset > bytes_.size() || bytes_.size() - offset < size) return std::nullopt;
    return bytes_.substr(offset, size);
  }
  uint64_t size() const { return bytes_.size(); }

 private:
  absl::string_view bytes_;
};

struct Entry {
  std::string name;
  uint16_t flags = 0;  // general purpose bit flags (central directory)
  uint16_t method = 0;
  uint32_t crc = 0;
  uint64_t compressed = 0;
  uint64_t uncompressed = 0;
  uint64_t local_header = 0;
};

uint32_t Crc32(uint32_t crc, absl::string_view data) {
  while (!data.empty()) {  // zlib takes uInt lengths
    const size_t n = std::min<size_t>(data.size(), 1u << 30);
    crc = static_cast<uint32_t>(
        crc32(crc, reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(n)));
    data.remove_prefix(n);
  }
  return crc;
}

// Inflates raw deflate `data`, returning the CRC-32 of the output and its size through the
// pointers, or an error message. Never holds more than one 64 KiB block of output.
// With `keep`, the output is appended to it.
std::optional<std::string> Inflate(absl::string_view data, uint64_t limit, uint32_t* crc,
                                   uint64_t* size, std::string* keep = nullptr) {
  z_stream stream;
  std::memset(&stream, 0, sizeof stream);
  if (inflateInit2(&stream, -MAX_WBITS) != Z_OK) return "zlib could not start";
  unsigned char out[1 << 16];
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(std::min<size_t>(data.size(), UINT32_MAX));
  *crc = 0;
  *size = 0;
  int result = Z_OK;
  while (result != Z_STREAM_END) {
    stream.next_out = out;
    stream.avail_out = sizeof out;
    result = inflate(&stream, Z_NO_FLUSH);
    if (result != Z_OK && result != Z_STREAM_END) {
      inflateEnd(&stream);
      return absl::StrCat("its deflate stream is corrupt (",
                          stream.msg != nullptr ? stream.msg : "zlib error", ")");
    }
    const size_t produced = sizeof out - stream.avail_out;
    *size += produced;
    if (*size > limit) {
      inflateEnd(&stream);
      return "it inflates to more than its declared size";
    }
    *crc = Crc32(*crc, absl::string_view(reinterpret_cast<const char*>(out), produced));
    if (keep != nullptr) keep->append(reinterpret_cast<const char*>(out), produced);
    if (result == Z_OK && produced == 0 && stream.avail_in == 0) {
      inflateEnd(&stream);
      return "its deflate stream ends early";
    }
  }
  inflateEnd(&stream);
  return std::nullopt;
}

// Checks every tensor storage a TorchScript pickle (`pickle_name`, e.g. "m/data.pkl")
// references against its record (`<dir><folder>/<key>`): present, exactly as long as the
// storage's element count times its element size, and every tensor view of it inside it.
// LibTorch 1.13 trusts the record: a shorter one makes it read memory it does not own.
absl::Status CheckStorages(absl::string_view pickle, const std::string& pickle_name,
                           const std::string& folder,
                           const std::map<std::string, uint64_t>& record_bytes,
                           absl::string_view path) {
  auto damaged = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is damaged: ", why));
  };
  absl::StatusOr<PickleValuePtr> root = ParsePickle(pickle, pickle_name);
  if (!root.ok()) return damaged(root.status().message());
  using Kind = PickleValue::Kind;
  return VisitPickle(*root, [&](const PickleValue& v) -> absl::Status {
    if (v.is(Kind::kPersistent)) {
      absl::StatusOr<PickleStorage> storage = StorageOf(*v.items[0]);
      if (!storage.ok())
        return damaged(absl::StrCat(pickle_name, ": ", storage.status().message()));
      const std::string record = folder + storage->key;
      const auto it = record_bytes.find(record);
      if (it == record_bytes.end()) {
        return damaged(absl::StrCat(pickle_name, " names a tensor record ", record,
                                    " the archive does not hold"));
      }
      const uint64_t needed =
          static_cast<uint64_t>(storage->elements) * storage->type.element_bytes;
      if (it->second != needed) {
        return damaged(absl::StrCat("record ", record, " holds ", it->second,
                                    " bytes where its storage of ", storage->elements, " ",
                                    storage->type.scalar, " elements needs ", needed));
      }
    } else if (v.is(Kind::kCall) && v.items[0]->is(Kind::kGlobal) &&
               v.items[0]->text == "torch._utils _rebuild_tensor_v2") {
      const std::vector<PickleValuePtr>& args = v.items[1]->items;
      if (args.empty() || !args[0]->is(Kind::kPersistent)) {
        return damaged(absl::StrCat(pickle_name, ": a tensor without its storage"));
      }
      absl::StatusOr<PickleStorage> storage = StorageOf(*args[0]->items[0]);
      if (!storage.ok())
        return damaged(absl::StrCat(pickle_name, ": ", storage.status().message()));
      absl::StatusOr<PickleTensorView> view = TensorViewOf(args, storage->elements);
      if (!view.ok()) {
        return damaged(absl::StrCat(pickle_name, ": ", view.status().message(), " (record ", folder,
                                    storage->key, ")"));
      }
    }
    return absl::OkStatus();
  });
}

bool IsIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Adds to `operators` each operator `code` (a TorchScript source file of the archive) calls
// as `ops.NS.NAME`, as NS::NAME, outside aten and prim (LibTorch's own, some of them the
// compiler's rather than registered operators). String constants are skipped: TorchScript
// prints them quoted, '...' or "...", with backslash escapes, and writes no comments.
void AddCalledOperators(absl::string_view code, std::set<std::string>* operators) {
  auto identifier = [&](size_t begin) {
    size_t end = begin;
    while (end < code.size() && IsIdentifierChar(code[end])) ++end;
    return code.substr(begin, end - begin);
  };
  size_t at = 0;
  while (at < code.size()) {
    const char c = code[at];
    if (c == '"' || c == '\'') {
      ++at;
      while (at < code.size() && code[at] != c) at += code[at] == '\\' ? 2 : 1;
      ++at;
      continue;
    }
    if (!absl::StartsWith(code.substr(at), "ops.") || (at > 0 && IsIdentifierChar(code[at - 1]))) {
      ++at;
      continue;
    }
    const absl::string_view ns = identifier(at + 4);
    const size_t dot = at + 4 + ns.size();
    at = dot;
    if (ns.empty() || dot >= code.size() || code[dot] != '.') continue;
    const absl::string_view name = identifier(dot + 1);
    at = dot + 1 + name.size();
    if (name.empty() || ns == "aten" || ns == "prim") continue;
    operators->insert(absl::StrCat(ns, "::", name));
  }
}

// The zip walk of both checks below; `torchscript` adds the TorchScript entries and storages,
// and `operators` (when not null) the operators the code calls.
absl::Status CheckZip(absl::string_view bytes, absl::string_view path, bool torchscript,
                      std::set<std::string>* operators) {
  auto not_archive = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a model archive: ", why));
  };
  auto damaged = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is damaged: ", why));
  };
  const Reader in(bytes);
  if (bytes.size() < kEndRecordBytes) return not_archive("too short for a zip file");

  // The end-of-central-directory record: the last signature with a record's room after it,
  // as miniz finds it, and its comment must reach the end of the file.
  std::optional<uint64_t> end;
  const uint64_t lowest = bytes.size() > kEndRecordBytes + kMaxCommentBytes
                              ? bytes.size() - kEndRecordBytes - kMaxCommentBytes
                              : 0;
  for (uint64_t at = bytes.size() - kEndRecordBytes + 1; at-- > lowest;) {
    if (in.Read(at, 4) == kEndOfCentralDirectory) {
      end = at;
      break;
    }
  }
  if (!end) return not_archive("no zip end-of-central-directory record");
  if (*end + kEndRecordBytes + *in.Read(*end + 20, 2) != bytes.size()) {
    return damaged("the end-of-central-directory record's comment does not end the file");
  }
  // The directory as LibTorch's miniz reads it: from the zip64 end record whenever a zip64
  // locator lies just before the end record (TorchScript writes one into every archive), and
  // from the end record otherwise. Checking the end record's copy while miniz read the zip64
  // one would check one directory and load another.
  uint64_t entries = *in.Read(*end + 10, 2);
  uint64_t entries_here = *in.Read(*end + 8, 2);
  uint64_t disk = *in.Read(*end + 4, 2);
  uint64_t directory_disk = *in.Read(*end + 6, 2);
  uint64_t directory_size = *in.Read(*end + 12, 4);
  uint64_t directory = *in.Read(*end + 16, 4);
  const bool zip64 = *end >= kZip64LocatorBytes + kZip64EndRecordBytes &&
                     in.Read(*end - kZip64LocatorBytes, 4) == kZip64Locator;
  if (zip64) {
    const uint64_t locator = *end - kZip64LocatorBytes;
    const uint64_t record = locator - kZip64EndRecordBytes;
    // miniz reads the record where the locator points (2.1) or just before the locator (3.x):
    // TorchScript's writer puts it in both places at once, and only that is accepted.
    if (in.Read(locator + 8, 8) != record || in.Read(record, 4) != kZip64EndOfCentralDirectory) {
      return damaged("the zip64 end record is not just before its locator");
    }
    if (*in.Read(record + 4, 8) < kZip64EndRecordBytes - 12) {
      return damaged("the zip64 end record is too short");
    }
    if (in.Read(locator + 16, 4) != 1) return damaged("a multi-disk archive (zip64 locator)");
    entries = *in.Read(record + 32, 8);
    entries_here = *in.Read(record + 24, 8);
    disk = *in.Read(record + 16, 4);
    directory_disk = *in.Read(record + 20, 4);
    directory_size = *in.Read(record + 40, 8);
    directory = *in.Read(record + 48, 8);
  } else if (entries == 0xffff || directory_size == 0xffffffff || directory == 0xffffffff) {
    return damaged("a zip64 archive without its zip64 locator");
  }
  if (entries != entries_here || disk != 0 || directory_disk != 0) {
    return damaged(absl::StrCat("a multi-disk archive (disk ", disk, ", directory on disk ",
                                directory_disk, ", ", entries_here, " of ", entries,
                                " entries on it)"));
  }
  if (!in.Slice(directory, directory_size))
    return damaged("the central directory lies outside the file");
  // Nothing between the directory and the end records: miniz would take it for data before
  // the archive and shift every offset by it.
  if (directory + directory_size != *end - (zip64 ? kZip64LocatorBytes + kZip64EndRecordBytes : 0))
    return damaged("the central directory does not end where the end records begin");
  if (entries > directory_size / 46)
    return damaged("more entries than the central directory holds");

  std::set<std::string> names;
  std::map<std::string, uint64_t> record_bytes;
  std::map<std::string, std::string> pickles;  // the entries named *.pkl, inflated
  std::map<std::string, std::string> code;     // the TorchScript source files, when wanted
  uint64_t at = directory;
  for (uint64_t i = 0; i < entries; ++i) {
    if (in.Read(at, 4) != kCentralHeader || at + 46 > directory + directory_size) {
      return damaged(absl::StrCat("central directory entry ", i, " is malformed"));
    }
    Entry e;
    e.flags = static_cast<uint16_t>(*in.Read(at + 8, 2));
    e.method = static_cast<uint16_t>(*in.Read(at + 10, 2));
    e.crc = static_cast<uint32_t>(*in.Read(at + 16, 4));
    e.compressed = *in.Read(at + 20, 4);
    e.uncompressed = *in.Read(at + 24, 4);
    const uint64_t name_bytes = *in.Read(at + 28, 2);
    const uint64_t extra_bytes = *in.Read(at + 30, 2);
    const uint64_t comment_bytes = *in.Read(at + 32, 2);
    e.local_header = *in.Read(at + 42, 4);
    const std::optional<absl::string_view> name = in.Slice(at + 46, name_bytes);
    const std::optional<absl::string_view> extra = in.Slice(at + 46 + name_bytes, extra_bytes);
    if (!name || !extra || !in.Slice(at + 46 + name_bytes + extra_bytes, comment_bytes) ||
        at + 46 + name_bytes + extra_bytes + comment_bytes > directory + directory_size) {
      return damaged(absl::StrCat("central directory entry ", i, " runs past the directory"));
    }
    e.name = std::string(*name);
    if (const uint64_t entry_disk = *in.Read(at + 34, 2); entry_disk != 0) {
      return damaged(absl::StrCat(e.name, ": on disk ", entry_disk, " of a multi-disk archive"));
    }
    // miniz takes an entry with the DOS directory attribute, or a name ending in '/', for a
    // directory and extracts nothing of it, successfully: LibTorch then reads the record's
    // buffer unwritten. TorchScript writes no directory entries.
    if (const uint64_t attributes = *in.Read(at + 38, 4);
        (attributes & 0x10) != 0 || absl::EndsWith(e.name, "/")) {
      return damaged(absl::StrFormat("%s: marked as a directory (external attributes %08x)", e.name,
                                     attributes));
    }
    // Zip64 sizes and offset, in this order, for the fields that hold 0xffffffff.
    if (e.uncompressed == 0xffffffff || e.compressed == 0xffffffff ||
        e.local_header == 0xffffffff) {
      const Reader x(*extra);
      std::optional<uint64_t> field;
      for (uint64_t p = 0; p + 4 <= extra->size(); p += 4 + *x.Read(p + 2, 2)) {
        if (x.Read(p, 2) == 1) {
          field = p + 4;
          break;
        }
      }
      if (!field) return damaged(absl::StrCat(e.name, ": zip64 sizes are missing"));
      for (uint64_t* value : {&e.uncompressed, &e.compressed, &e.local_header}) {
        if (*value != 0xffffffff) continue;
        const std::optional<uint64_t> wide = x.Read(*field, 8);
        if (!wide) return damaged(absl::StrCat(e.name, ": zip64 sizes are cut short"));
        *value = *wide;
        *field += 8;
      }
    }
    at += 46 + name_bytes + extra_bytes + comment_bytes;
    if (!names.insert(e.name).second) return damaged(absl::StrCat(e.name, " appears twice"));

    // The local header, then the entry's data.
    if (in.Read(e.local_header, 4) != kLocalHeader || !in.Read(e.local_header + 30, 0)) {
      return damaged(absl::StrCat(e.name, ": its local header is missing"));
    }
    const uint64_t local_name_bytes = *in.Read(e.local_header + 26, 2);
    const uint64_t data_start =
        e.local_header + 30 + local_name_bytes + *in.Read(e.local_header + 28, 2);
    // The two copies of the name, and of the CRC-32 unless a data descriptor carries it.
    if (in.Slice(e.local_header + 30, local_name_bytes) != absl::string_view(e.name)) {
      return damaged(absl::StrCat(e.name, ": its local header names another entry"));
    }
    // Encryption (bits 0 and 6) and patch data (bit 5): TorchScript writes neither, and
    // LibTorch's miniz leaks its reader's state when it refuses such an entry (found by
    // fuzzing), so they are refused here.
    const uint64_t local_flags = *in.Read(e.local_header + 6, 2);
    if (((e.flags | local_flags) & kUnsupportedFlags) != 0) {
      return not_archive(absl::StrCat(e.name, " is encrypted or patch data (zip flags ", e.flags,
                                      " / ", local_flags, "); TorchScript writes neither"));
    }
    const bool descriptor = (local_flags & 0x8) != 0;
    if (!descriptor && in.Read(e.local_header + 14, 4) != e.crc) {
      return damaged(absl::StrCat(e.name, ": its two CRC-32s differ"));
    }
    const std::optional<absl::string_view> data = in.Slice(data_start, e.compressed);
    if (!data) return damaged(absl::StrCat(e.name, ": its data runs past the end of the file"));
    uint32_t crc = 0;
    uint64_t size = 0;
    std::string* keep = nullptr;
    if (absl::EndsWith(e.name, ".pkl")) {
      keep = &pickles[e.name];
    } else if (operators != nullptr && absl::StrContains(e.name, "/code/") &&
               absl::EndsWith(e.name, ".py")) {
      keep = &code[e.name];
    }
    if (e.method == 0) {
      if (e.compressed != e.uncompressed) {
        return damaged(absl::StrCat(e.name, ": stored, but its two sizes differ"));
      }
      crc = Crc32(0, *data);
      size = data->size();
      if (keep != nullptr) *keep = std::string(*data);
    } else if (e.method == 8) {
      if (std::optional<std::string> error = Inflate(*data, e.uncompressed, &crc, &size, keep)) {
        return damaged(absl::StrCat(e.name, ": ", *error));
      }
    } else {
      return not_archive(absl::StrCat(e.name, " uses zip compression method ", e.method,
                                      " (TorchScript writes stored or deflated entries)"));
    }
    if (size != e.uncompressed) {
      return damaged(
          absl::StrCat(e.name, ": ", size, " bytes where the directory says ", e.uncompressed));
    }
    if (crc != e.crc) {
      return damaged(absl::StrFormat("%s fails its CRC-32 check (stored %08x, computed %08x)",
                                     e.name, e.crc, crc));
    }
    record_bytes[e.name] = size;
  }
  if (names.empty()) return not_archive("the zip file is empty");
  if (!torchscript) return absl::OkStatus();
  const std::string& first = *names.begin();
  const std::string dir = first.substr(0, first.find('/') + 1);
  for (const char* required : {"data.pkl", "constants.pkl", "version"}) {
    if (dir.empty() || !names.count(dir + required)) {
      return not_archive(absl::StrCat("it has no ", required, " (not a TorchScript archive)"));
    }
  }
  // Tensors: data.pkl's storages in <dir>data/, constants.pkl's in <dir>constants/.
  for (const auto& [pickle, folder] : {std::pair<std::string, std::string>{"data.pkl", "data/"},
                                       {"constants.pkl", "constants/"}}) {
    const std::string name = dir + pickle;
    if (absl::Status s = CheckStorages(pickles[name], name, dir + folder, record_bytes, path);
        !s.ok()) {
      return s;
    }
  }
  if (operators != nullptr) {
    for (const auto& [name, source] : code) AddCalledOperators(source, operators);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckModelArchiveBytes(absl::string_view bytes, absl::string_view path,
                                    std::set<std::string>* operators) {
  return CheckZip(bytes, path, /*torchscript=*/true, operators);
}

absl::Status CheckZipArchiveBytes(absl::string_view bytes, absl::string_view path) {
  return CheckZip(bytes, path, /*torchscript=*/false, /*operators=*/nullptr);
}

}  // namespace grail
