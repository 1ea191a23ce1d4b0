// TLS for the gRPC port: --tls-cert and --tls-key (PEM) turn it on, --tls-client-ca turns on
// mutual TLS (a client must present a certificate signed by that CA). The files are checked
// at start (each parses; the key belongs to the certificate) so that a bad file fails the
// start with a clear error, then watched by gRPC's FileWatcherCertificateProvider: a rotated
// certificate, key or CA is picked up within the reload interval with no restart, and
// connections already open keep their session.
#ifndef GRAIL_SERVER_RPC_TRANSPORT_SECURITY_H_
#define GRAIL_SERVER_RPC_TRANSPORT_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace grpc {
class ServerCredentials;
}  // namespace grpc

namespace grail {

struct ServerTlsFiles {
  std::string cert;       // PEM certificate chain, the server's first
  std::string key;        // PEM private key of the first certificate
  std::string client_ca;  // PEM CA bundle; non-empty turns on mutual TLS
  int reload_seconds = 10;
};

// INVALID_ARGUMENT naming the file that does not parse, or the key that does not match the
// certificate; NOT_FOUND for a missing file.
absl::Status CheckTlsFiles(const ServerTlsFiles& files);

// Credentials for grpc::ServerBuilder::AddListeningPort: TLS 1.2+ with the files above,
// requiring and verifying a client certificate when client_ca is set. Runs CheckTlsFiles.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeTlsServerCredentials(
    const ServerTlsFiles& files);

}  // namespace grail

#endif  // GRAIL_SERVER_RPC_TRANSPORT_SECURITY_H_
