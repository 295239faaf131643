#include "common/grpc_status.h"

#include <string>

namespace tessera {

// absl::StatusCode and grpc::StatusCode share their numeric values (both follow
// google.rpc.Code), which the static_asserts pin down.
static_assert(static_cast<int>(absl::StatusCode::kDeadlineExceeded) == grpc::StatusCode::DEADLINE_EXCEEDED);
static_assert(static_cast<int>(absl::StatusCode::kResourceExhausted) == grpc::StatusCode::RESOURCE_EXHAUSTED);
static_assert(static_cast<int>(absl::StatusCode::kUnauthenticated) == grpc::StatusCode::UNAUTHENTICATED);
static_assert(static_cast<int>(absl::StatusCode::kDataLoss) == grpc::StatusCode::DATA_LOSS);

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace tessera
