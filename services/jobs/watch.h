// The WatchJob loop every job-running service shares: stream a job's
// snapshots to one client — each new version once, at most one per
// `interval` (the final one always, at once) — until the job ends, the
// client cancels, or a write fails.
#ifndef TESSERA_SERVICES_JOBS_WATCH_H_
#define TESSERA_SERVICES_JOBS_WATCH_H_

#include <functional>

#include <grpcpp/server_context.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/jobs/job_registry.h"

namespace tessera::jobs {

// `send` writes whatever the service makes of a snapshot; it returns false
// when the client stopped receiving (the watch then ends UNAVAILABLE, or
// CANCELLED when the call was cancelled).
absl::Status WatchJobSnapshots(const grpc::ServerContextBase& context, Job& job, absl::Duration interval,
                               const std::function<bool(const JobSnapshot&)>& send);

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_WATCH_H_
