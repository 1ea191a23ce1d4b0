#include "server/wire/chunk_parsing.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"

namespace grail {
namespace {

using google::protobuf::internal::WireFormatLite;

std::string Flatten(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!buffer.Dump(&slices).ok()) return bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return bytes;
}

// Reads a length-delimited field's bytes; false on malformed input.
bool ReadBytes(google::protobuf::io::CodedInputStream* in, std::string* out) {
  uint32_t length = 0;
  return in->ReadVarint32(&length) && in->ReadString(out, static_cast<int>(length));
}

// Walks an AddTriplesRequest / RemoveTriplesRequest (triples = 1, first_line = 2,
// entities = 3, relations = 4) on the wire and names the first name that is not valid UTF-8.
absl::Status FindInvalidName(const std::string& bytes) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  uint64_t first_line = 0;
  int fact = 0;
  int names[2] = {0, 0};  // entities, relations
  absl::Status found = absl::OkStatus();
  for (uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
    const int field = WireFormatLite::GetTagFieldNumber(tag);
    const auto wire = WireFormatLite::GetTagWireType(tag);
    if (field == 1 && wire == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      std::string triple;
      if (!ReadBytes(&in, &triple)) break;
      google::protobuf::io::CodedInputStream inner(reinterpret_cast<const uint8_t*>(triple.data()),
                                                   static_cast<int>(triple.size()));
      for (uint32_t t = inner.ReadTag(); t != 0; t = inner.ReadTag()) {
        const int f = WireFormatLite::GetTagFieldNumber(t);
        if (f >= 1 && f <= 3 &&
            WireFormatLite::GetTagWireType(t) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
          std::string name;
          if (!ReadBytes(&inner, &name)) break;
          if (found.ok() && !IsValidUtf8(name)) {
            static constexpr const char* kRoles[] = {"", "head", "relation", "tail"};
            found = absl::InvalidArgumentError(
                absl::StrCat("@", fact, ": the ", kRoles[f], " is not valid UTF-8"));
          }
        } else if (!WireFormatLite::SkipField(&inner, t)) {
          break;
        }
      }
      ++fact;
    } else if (field == 2 && wire == WireFormatLite::WIRETYPE_VARINT) {
      if (!in.ReadVarint64(&first_line)) break;
    } else if ((field == 3 || field == 4) && wire == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      std::string name;
      if (!ReadBytes(&in, &name)) break;
      int& index = names[field - 3];
      if (found.ok() && !IsValidUtf8(name)) {
        found = absl::InvalidArgumentError(
            absl::StrCat(field == 3 ? "entities[" : "relations[", index, "] is not valid UTF-8"));
      }
      ++index;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      break;
    }
  }
  if (found.ok()) return found;
  // "@F: ..." names fact F; give it the line the client knows.
  std::string message(found.message());
  if (absl::StartsWith(message, "@")) {
    const size_t colon = message.find(':');
    const uint64_t position = std::stoull(message.substr(1, colon - 1));
    message = absl::StrCat("line ", (first_line > 0 ? first_line : 1) + position,
                           message.substr(colon), " (fact ", position, ")");
  }
  return absl::InvalidArgumentError(message);
}

}  // namespace

bool IsValidUtf8(absl::string_view bytes) {
  size_t i = 0;
  const size_t n = bytes.size();
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(bytes[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    int extra = 0;
    uint32_t code = 0;
    if ((c & 0xe0) == 0xc0) {
      extra = 1;
      code = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      extra = 2;
      code = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      extra = 3;
      code = c & 0x07;
    } else {
      return false;
    }
    if (i + extra >= n) return false;  // the sequence runs past the end
    for (int k = 1; k <= extra; ++k) {
      const unsigned char next = static_cast<unsigned char>(bytes[i + k]);
      if ((next & 0xc0) != 0x80) return false;
      code = (code << 6) | (next & 0x3f);
    }
    static constexpr uint32_t kMinimum[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMinimum[extra] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

absl::Status ParseChunk(const grpc::ByteBuffer& buffer, google::protobuf::MessageLite* chunk) {
  const std::string bytes = Flatten(buffer);
  if (chunk->ParseFromString(bytes)) return absl::OkStatus();
  const absl::Status named = FindInvalidName(bytes);
  if (!named.ok()) return named;
  return absl::InvalidArgumentError(
      absl::StrCat("the bytes are not a ", chunk->GetTypeName(), " message"));
}

}  // namespace grail
