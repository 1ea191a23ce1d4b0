// gRPC and Abseil statuses in one another's terms, and the canonical code names (`NOT_FOUND`,
// ...) that the client prints, the load generator counts by and the server's metrics label
// calls with. The two libraries share the canonical codes and their numbering.
#ifndef GRAIL_COMMON_GRPC_STATUS_H_
#define GRAIL_COMMON_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace grail {

// The canonical codes are 0 (OK) to 16 (UNAUTHENTICATED).
inline constexpr int kNumStatusCodes = 17;

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

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace grail

#endif  // GRAIL_COMMON_GRPC_STATUS_H_
