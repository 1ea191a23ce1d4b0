// The wire format's chunks, read from their bytes, and a request's triple as the store takes
// it; what the gRPC handlers (server/rpc) and replication (chunks read off the stream) share.
//
// proto3 `string` fields must hold valid UTF-8; protobuf refuses a message where one does
// not, and gRPC then ends a stream as if the client had closed it (acknowledged chunks, then
// OK: the bad chunk silently gone). The service therefore reads AddTriples and RemoveTriples
// chunks as raw bytes and parses them here (ParseChunk), naming the line of a bad name.
#ifndef GRAIL_SERVER_WIRE_CHUNK_PARSING_H_
#define GRAIL_SERVER_WIRE_CHUNK_PARSING_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"
#include "graph/triple_file.h"
#include "grpcpp/support/byte_buffer.h"
#include "kg/v1/knowledge_graph.pb.h"

namespace grail {

// Whether `bytes` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing
// above U+10FFFF).
bool IsValidUtf8(absl::string_view bytes);

// A request's triple as the store and the predictor take it.
inline NamedTriple ToNamed(const kg::v1::Triple& t) {
  return NamedTriple{t.head(), t.relation(), t.tail()};
}

// Parses `buffer` into `chunk`, an AddTriplesRequest or RemoveTriplesRequest. On failure,
// INVALID_ARGUMENT saying why: for a name that is not valid UTF-8, which one, as
// "line L: the tail is not valid UTF-8 (fact F)" (L counted from the chunk's first_line, as
// rejections of stored chunks are) or "entities[K] is not valid UTF-8"; otherwise that
// the bytes are not such a message.
absl::Status ParseChunk(const grpc::ByteBuffer& buffer, google::protobuf::MessageLite* chunk);

}  // namespace grail

#endif  // GRAIL_SERVER_WIRE_CHUNK_PARSING_H_
