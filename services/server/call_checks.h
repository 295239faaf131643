// Helpers for service handlers: noticing that a call was cancelled or ran past
// its deadline, so long loops stop working for a client that has gone.
//
//   for (...) {
//     TESSERA_RETURN_IF_ERROR(CheckNotCancelled(*context));
//     ...
//   }
#ifndef TESSERA_SERVICES_SERVER_CALL_CHECKS_H_
#define TESSERA_SERVICES_SERVER_CALL_CHECKS_H_

#include <grpcpp/server_context.h>

#include "absl/status/status.h"

namespace tessera {

// OK while the call is live; DEADLINE_EXCEEDED when it was cancelled and its
// deadline has passed (or is less than a second away: the client's cancel at
// its deadline may beat the server's timer), CANCELLED otherwise (client cancel, server shutdown,
// transport failure). The client sees its own status in those cases anyway;
// this one ends the handler early and is what the server's metrics record.
absl::Status CheckNotCancelled(const grpc::ServerContextBase& context);

// The status to return when a blocking Read()/Write() failed: the
// cancellation status when the call is gone, else `otherwise`.
absl::Status StatusAfterFailedIo(const grpc::ServerContextBase& context, absl::Status otherwise);

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_CALL_CHECKS_H_
