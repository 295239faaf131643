// The vocabulary every job-running part shares (engines, the job store, the
// scheduler, the services' job adapters): job states, a progress report and
// the rule for client-chosen ids.
#ifndef TESSERA_SERVICES_JOBS_JOB_TYPES_H_
#define TESSERA_SERVICES_JOBS_JOB_TYPES_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tessera::jobs {

// Values match tessera.v1.JobState (protos/tessera/v1/common.proto).
enum class JobState : int {
  kQueued = 1,
  kRunning = 2,
  kSucceeded = 3,
  kFailed = 4,
  kCancelled = 5,
};

bool IsTerminal(JobState state);
absl::string_view JobStateName(JobState state);  // "QUEUED", "RUNNING", ...

struct JobProgress {
  std::string stage;
  int64_t step = 0;
  int64_t total_steps = 0;        // 0 when unknown
  double fraction = 0;            // 0..1 overall, best estimate
  std::map<std::string, double> metrics;
  std::string message;
};

// Client-chosen job and request ids: 1-128 characters of [A-Za-z0-9._-];
// INVALID_ARGUMENT otherwise.
absl::Status ValidateJobId(absl::string_view id);

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_JOB_TYPES_H_
