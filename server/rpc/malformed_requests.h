// Unary requests whose bytes do not parse, told apart and named instead of failing bare.
//
// gRPC fails a unary call whose request does not deserialize (a name that is not valid UTF-8)
// before any handler runs, with UNIMPLEMENTED or INTERNAL and no message. A server
// interceptor (MalformedRequestInterceptorFactory) turns that into INVALID_ARGUMENT saying so.
// Streamed chunks are parsed by the service itself (server/wire/chunk_parsing.h).
#ifndef GRAIL_SERVER_RPC_MALFORMED_REQUESTS_H_
#define GRAIL_SERVER_RPC_MALFORMED_REQUESTS_H_

#include <functional>
#include <string>
#include <utility>

#include "absl/strings/string_view.h"
#include "grpcpp/support/server_interceptor.h"

namespace grail {

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

#endif  // GRAIL_SERVER_RPC_MALFORMED_REQUESTS_H_
