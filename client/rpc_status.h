// gRPC outcomes in the client's terms: the canonical code names (`NOT_FOUND`, ...) that the
// CLI prints and the load generator counts by.
#ifndef GRAIL_CLIENT_RPC_STATUS_H_
#define GRAIL_CLIENT_RPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace grail {

// gRPC and Abseil share the canonical codes and their numbering.
inline absl::StatusCode ToAbslCode(grpc::StatusCode code) {
  return static_cast<absl::StatusCode>(static_cast<int>(code));
}

// "OK", "NOT_FOUND", "DEADLINE_EXCEEDED", ...
inline std::string StatusCodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(ToAbslCode(code));
}

inline absl::Status ToAbslStatus(const grpc::Status& status) {
  return absl::Status(ToAbslCode(status.error_code()), status.error_message());
}

}  // namespace grail

#endif  // GRAIL_CLIENT_RPC_STATUS_H_
