// How a gRPC status becomes an HTTP answer at the gateway: the standard
// gRPC->HTTP status mapping and the JSON error body
//   {"code": <gRPC code>, "status": "<CODE_NAME>", "message": "...", "retryAfterMs": N}
// ("retryAfterMs" only when the call's grpc-retry-pushback-ms trailer was set;
// the gateway then also sends Retry-After in whole seconds, rounded up).
#ifndef TESSERA_SERVICES_GATEWAY_HTTP_ERROR_H_
#define TESSERA_SERVICES_GATEWAY_HTTP_ERROR_H_

#include <cstdint>
#include <string>

#include <grpcpp/support/status.h>

namespace tessera::gateway {

// INVALID_ARGUMENT 400, UNAUTHENTICATED 401, PERMISSION_DENIED 403, NOT_FOUND 404,
// ALREADY_EXISTS/ABORTED 409, FAILED_PRECONDITION 400, OUT_OF_RANGE 400 (416 is
// for Range headers, answered before any call), RESOURCE_EXHAUSTED 429,
// CANCELLED 499, UNIMPLEMENTED 501, UNAVAILABLE 503, DEADLINE_EXCEEDED 504, others 500.
int HttpStatusOf(grpc::StatusCode code);

// "INVALID_ARGUMENT", ... (the canonical upper-case names).
std::string GrpcCodeName(grpc::StatusCode code);

// The JSON error body; retry_after_ms < 0: none.
std::string ErrorJson(const grpc::Status& status, int64_t retry_after_ms = -1);

// Retry-After seconds for a pushback of `ms` milliseconds (rounded up, at least 1).
int64_t RetryAfterSeconds(int64_t ms);

}  // namespace tessera::gateway

#endif  // TESSERA_SERVICES_GATEWAY_HTTP_ERROR_H_
