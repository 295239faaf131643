// JobSnapshot -> tessera.v1.JobStatus / Progress (common.proto), for every
// service that exposes jobs.
#ifndef TESSERA_SERVICES_JOBS_JOB_PROTO_H_
#define TESSERA_SERVICES_JOBS_JOB_PROTO_H_

#include <string>

#include "absl/status/statusor.h"
#include "services/jobs/job_registry.h"
#include "tessera/v1/common.pb.h"

namespace tessera::jobs {

// Progress with job_id and state; for an ended job the message says how it
// ended ("succeeded", or the error as "CODE: message").
v1::Progress ToProgressProto(const JobSnapshot& snapshot);

// error_message is "CODE: message" (absl::Status::ToString) for failed and
// cancelled jobs, so clients see the error's code too.
v1::JobStatus ToJobStatusProto(const JobSnapshot& snapshot);

// The GetJob and CancelJob bodies every job-running service shares: NOT_FOUND
// for an unknown id; RequestJobCancel requests cancellation (logged with
// `service`) and returns the snapshot taken right after.
absl::StatusOr<v1::JobStatus> GetJobStatus(const JobRegistry& registry, const std::string& job_id);
absl::StatusOr<v1::JobStatus> RequestJobCancel(const JobRegistry& registry, const std::string& job_id,
                                               const char* service);

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_JOB_PROTO_H_
