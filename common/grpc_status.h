// The single mapping from absl::Status (used everywhere inside Tessera) to
// grpc::Status (used only at the service edge). Codes map one to one; the
// message is kept so the user sees what to fix.
#ifndef TESSERA_COMMON_GRPC_STATUS_H_
#define TESSERA_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace tessera {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace tessera

#endif  // TESSERA_COMMON_GRPC_STATUS_H_
