// Requests whose bytes do not parse, told apart and named instead of dropped.
//
// proto3 `string` fields must hold valid UTF-8; protobuf refuses a message where one does
// not, and gRPC then ends a stream as if the client had closed it (acknowledged chunks, then
// OK: the bad chunk silently gone) or fails a unary call with INTERNAL and no message. The
// service therefore reads AddTriples and RemoveTriples chunks as raw bytes and parses them
// itself (ParseChunk), and a server interceptor (MalformedRequestInterceptorFactory) turns a
// unary request that failed to parse into INVALID_ARGUMENT saying so.
#ifndef GRAIL_SERVER_RPC_REQUEST_PARSING_H_
#define GRAIL_SERVER_RPC_REQUEST_PARSING_H_

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message_lite.h"
#include "graph/triple_file.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/server_interceptor.h"
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

// For unary KnowledgeGraph calls: a request that failed to parse ends with INVALID_ARGUMENT
// ("the request could not be parsed: ...") instead of gRPC's INTERNAL with no message, and is
// reported to `on_refused(method, code, seconds)` (when given): no handler sees such a call,
// so the service cannot count it itself. A request over the server's message size limit is
// refused inside gRPC, before any interceptor: it is not reported.
class MalformedRequestInterceptorFactory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  using Report = std::function<void(absl::string_view method, int grpc_code, double seconds)>;
  explicit MalformedRequestInterceptorFactory(Report on_refused = nullptr)
      : on_refused_(std::move(on_refused)) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override;

 private:
  const Report on_refused_;
};

}  // namespace grail

#endif  // GRAIL_SERVER_RPC_REQUEST_PARSING_H_
