// absl::Status helpers used throughout Tessera. Errors are absl::Status inside
// the process and become gRPC statuses only at the service edge (grpc_status.h).
#ifndef TESSERA_COMMON_STATUS_H_
#define TESSERA_COMMON_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Returns from the current function if `expr` yields a non-OK absl::Status.
#define TESSERA_RETURN_IF_ERROR(expr)                \
  do {                                               \
    ::absl::Status tessera_status_ = (expr);         \
    if (!tessera_status_.ok()) return tessera_status_; \
  } while (0)

#define TESSERA_STATUS_CONCAT_INNER_(a, b) a##b
#define TESSERA_STATUS_CONCAT_(a, b) TESSERA_STATUS_CONCAT_INNER_(a, b)

// `TESSERA_ASSIGN_OR_RETURN(auto x, MakeX());` declares/assigns x from a
// StatusOr, or returns its error.
#define TESSERA_ASSIGN_OR_RETURN(lhs, expr) \
  TESSERA_ASSIGN_OR_RETURN_IMPL_(TESSERA_STATUS_CONCAT_(tessera_statusor_, __LINE__), lhs, expr)

#define TESSERA_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

namespace tessera {

// Prefixes an error's message with context ("reading ch2.nii.gz: ...") while
// keeping its code. OK passes through unchanged.
absl::Status Annotate(const absl::Status& status, absl::string_view context);

}  // namespace tessera

#endif  // TESSERA_COMMON_STATUS_H_
