#include "server/rpc/malformed_requests.h"

#include <chrono>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace grail {
namespace {

class MalformedRequestInterceptor final : public grpc::experimental::Interceptor {
 public:
  MalformedRequestInterceptor(std::string method,
                              const MalformedRequestInterceptorFactory::Report* on_refused)
      : method_(std::move(method)), on_refused_(on_refused) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() != nullptr) {
      parsed_ = true;
    }
    // gRPC fails a unary call whose request does not deserialize before any handler runs,
    // with no message and UNIMPLEMENTED (1.51; INTERNAL in others): the request never
    // appears as a message.
    grpc::StatusCode code = grpc::StatusCode::OK;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      code = methods->GetSendStatus().error_code();
    }
    if (!parsed_ &&
        (code == grpc::StatusCode::INTERNAL || code == grpc::StatusCode::UNIMPLEMENTED)) {
      methods->ModifySendStatus(grpc::Status(
          grpc::StatusCode::INVALID_ARGUMENT,
          absl::StrCat("the ", method_,
                       " request could not be parsed: a name is not valid UTF-8, or the bytes "
                       "are not a ",
                       method_, "Request; nothing was done")));
      if (*on_refused_) {
        (*on_refused_)(
            method_, static_cast<int>(grpc::StatusCode::INVALID_ARGUMENT),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
      }
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  const MalformedRequestInterceptorFactory::Report* const on_refused_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  bool parsed_ = false;
};

}  // namespace

grpc::experimental::Interceptor* MalformedRequestInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  constexpr absl::string_view kPrefix = "/kg.v1.KnowledgeGraph/";
  const absl::string_view method = info->method();
  if (info->type() != grpc::experimental::ServerRpcInfo::Type::UNARY ||
      !absl::StartsWith(method, kPrefix)) {
    return nullptr;
  }
  return new MalformedRequestInterceptor(std::string(method.substr(kPrefix.size())), &on_refused_);
}

}  // namespace grail
