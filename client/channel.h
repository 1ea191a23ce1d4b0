// The client's channel to grail-server: plaintext or TLS (optionally with a client
// certificate for mutual TLS), and a bearer token sent with every call.
#ifndef GRAIL_CLIENT_CHANNEL_H_
#define GRAIL_CLIENT_CHANNEL_H_

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "grpcpp/support/channel_arguments.h"

namespace grail {

struct ChannelOptions {
  std::string target;  // HOST:PORT
  // TLS is on when tls_ca is set: the PEM CA bundle the server's certificate must chain to.
  std::string tls_ca;
  std::string tls_cert;  // PEM client certificate chain, for mutual TLS (with tls_key)
  std::string tls_key;
  // The name the server's certificate must carry, when it differs from the target's host
  // (e.g. connecting by IP address).
  std::string tls_server_name;
  // Sent as "authorization: Bearer TOKEN" with every call; empty: none.
  std::string token;
};

// The server a command talks to unless told otherwise: the environment's GRAIL_TARGET, so that
// a shell or a container points every command at one server once; else localhost:50051.
std::string DefaultTarget();

// `flag` (a --token flag's value), or where it is empty the environment's GRAIL_TOKEN; empty
// when neither is set.
std::string TokenOrEnvironment(std::string flag);

// INVALID_ARGUMENT for a client certificate without its key (or the reverse), NOT_FOUND for
// a file that cannot be read. The channel connects lazily, as gRPC channels do.
absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const ChannelOptions& options,
                                                           grpc::ChannelArguments args);

// The standard health service's answer for the whole server (grpc.health.v1.Health/Check
// with service ""): 1 SERVING, 2 NOT_SERVING, 0 UNKNOWN; or the call's error.
absl::StatusOr<int> CheckHealth(const std::shared_ptr<grpc::Channel>& channel,
                                std::chrono::milliseconds deadline);

}  // namespace grail

#endif  // GRAIL_CLIENT_CHANNEL_H_
