#include "services/jobs/watch.h"

#include <algorithm>
#include <cstdint>
#include <limits>

#include "common/status.h"
#include "services/server/call_checks.h"

namespace tessera::jobs {
namespace {
// How often a waiting watch checks for a cancelled call.
constexpr absl::Duration kWatchPoll = absl::Milliseconds(200);
}  // namespace

absl::Status WatchJobSnapshots(const grpc::ServerContextBase& context, Job& job, absl::Duration interval,
                               const std::function<bool(const JobSnapshot&)>& send) {
  int64_t sent_version = -1;
  absl::Time last_sent = absl::InfinitePast();
  for (;;) {
    TESSERA_RETURN_IF_ERROR(CheckNotCancelled(context));
    const absl::Time now = absl::Now();
    JobSnapshot s;
    if (sent_version >= 0 && now < last_sent + interval) {
      // Throttled: wait out the interval, waking early only when the job ends.
      s = job.WaitForChange(std::numeric_limits<int64_t>::max(), std::min(last_sent + interval, now + kWatchPoll));
      if (!IsTerminal(s.state)) continue;
    } else {
      s = job.WaitForChange(sent_version, now + kWatchPoll);
    }
    if (!IsTerminal(s.state) && s.version <= sent_version) continue;
    if (!send(s)) {
      return StatusAfterFailedIo(context, absl::UnavailableError("the client stopped receiving progress"));
    }
    sent_version = s.version;
    last_sent = absl::Now();
    if (IsTerminal(s.state)) return absl::OkStatus();
  }
}

}  // namespace tessera::jobs
