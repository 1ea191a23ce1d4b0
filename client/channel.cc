#include "client/channel.h"

#include <cstdlib>
#include <future>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/file_text.h"
#include "common/grpc_status.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/client_interceptor.h"

namespace grail {

std::string DefaultTarget() {
  const char* from_environment = std::getenv("GRAIL_TARGET");
  return from_environment != nullptr && *from_environment != '\0' ? from_environment
                                                                  : "localhost:50051";
}

std::string TokenOrEnvironment(std::string flag) {
  if (!flag.empty()) return flag;
  const char* from_environment = std::getenv("GRAIL_TOKEN");
  return from_environment != nullptr ? from_environment : "";
}
namespace {

// Adds the bearer token to every call's initial metadata. An interceptor rather than call
// credentials, which gRPC sends only over TLS: a token on a plaintext loopback channel (a
// sidecar, a test) works too.
class BearerToken final : public grpc::experimental::Interceptor {
 public:
  explicit BearerToken(const std::string* header) : header_(header) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *header_});
    }
    methods->Proceed();
  }

 private:
  const std::string* const header_;
};

class BearerTokenFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit BearerTokenFactory(const std::string& token) : header_("Bearer " + token) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new BearerToken(&header_);
  }

 private:
  const std::string header_;  // the factory lives as long as the channel
};

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ChannelOptions& options,
                                                           grpc::ChannelArguments args) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!options.tls_cert.empty() && options.tls_ca.empty()) {
    return absl::InvalidArgumentError("--tls-cert needs --tls-ca (the server's CA)");
  }
  if (!options.tls_ca.empty()) {
    grpc::SslCredentialsOptions ssl;
    absl::StatusOr<std::string> ca = ReadFileText(options.tls_ca, "--tls-ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *std::move(ca);
    if (!options.tls_cert.empty()) {
      absl::StatusOr<std::string> cert = ReadFileText(options.tls_cert, "--tls-cert");
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadFileText(options.tls_key, "--tls-key");
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
  }
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  if (!options.token.empty()) {
    interceptors.push_back(std::make_unique<BearerTokenFactory>(options.token));
  }
  return grpc::experimental::CreateCustomChannelWithInterceptors(options.target, credentials, args,
                                                                 std::move(interceptors));
}

absl::StatusOr<int> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                std::chrono::milliseconds deadline) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  // HealthCheckRequest{service: ""} serialises to no bytes; the response is field 1, an enum.
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  std::promise<grpc::Status> done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&done](grpc::Status s) { done.set_value(std::move(s)); });
  const grpc::Status status = done.get_future().get();
  if (!status.ok()) return ToAbslStatus(status);
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable health response");
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  if (bytes.empty()) return 0;  // UNKNOWN is the default value, sent as nothing
  if (bytes.size() != 2 || bytes[0] != 0x08) {
    return absl::InternalError("unexpected health response");
  }
  return static_cast<int>(bytes[1]);
}

}  // namespace grail
