#include "services/jobs/job_types.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace tessera::jobs {

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed || state == JobState::kCancelled;
}

absl::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued: return "QUEUED";
    case JobState::kRunning: return "RUNNING";
    case JobState::kSucceeded: return "SUCCEEDED";
    case JobState::kFailed: return "FAILED";
    case JobState::kCancelled: return "CANCELLED";
  }
  return "UNKNOWN";
}

absl::Status ValidateJobId(absl::string_view id) {
  if (id.empty() || id.size() > 128) {
    return absl::InvalidArgumentError(absl::StrCat("job id must have 1 to 128 characters, got ", id.size()));
  }
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("job id '", absl::CHexEscape(id), "' may only use letters, digits, '.', '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace tessera::jobs
