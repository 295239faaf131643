#include "services/server/call_checks.h"

#include <chrono>
#include <utility>

namespace tessera {

namespace {

// A client cancels its call when its deadline passes; the cancellation can
// reach the server a little before the server's copy of the deadline (set
// when the call arrived) expires. Within this margin, call it the deadline.
constexpr std::chrono::milliseconds kDeadlineSlack(1000);

}  // namespace

absl::Status CheckNotCancelled(const grpc::ServerContextBase& context) {
  if (!context.IsCancelled()) return absl::OkStatus();
  const auto deadline = context.deadline();
  if (deadline != std::chrono::system_clock::time_point::max() &&
      std::chrono::system_clock::now() + kDeadlineSlack >= deadline) {
    return absl::DeadlineExceededError("deadline exceeded; the call was abandoned");
  }
  return absl::CancelledError("the call was cancelled");
}

absl::Status StatusAfterFailedIo(const grpc::ServerContextBase& context, absl::Status otherwise) {
  absl::Status cancelled = CheckNotCancelled(context);
  if (!cancelled.ok()) return cancelled;
  return otherwise;
}

}  // namespace tessera
