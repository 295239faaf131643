#include "services/jobs/job_proto.h"

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/log.h"

namespace tessera::jobs {
namespace {

std::string ErrorText(const JobSnapshot& s) {
  if (s.error.ok()) return "";
  return std::string(absl::StatusCodeToString(s.error.code())) + ": " + std::string(s.error.message());
}

}  // namespace

v1::Progress ToProgressProto(const JobSnapshot& s) {
  v1::Progress p;
  p.set_job_id(s.id);
  p.set_state(static_cast<v1::JobState>(static_cast<int>(s.state)));
  p.set_stage(s.progress.stage);
  p.set_step(s.progress.step);
  p.set_total_steps(s.progress.total_steps);
  p.set_fraction(s.state == JobState::kSucceeded ? 1.0 : s.progress.fraction);
  for (const auto& [name, value] : s.progress.metrics) (*p.mutable_metrics())[name] = value;
  switch (s.state) {
    case JobState::kSucceeded:
      p.set_message("succeeded");
      break;
    case JobState::kFailed:
    case JobState::kCancelled:
      p.set_message(ErrorText(s));
      break;
    default:
      p.set_message(s.cancel_requested ? "cancelling: " + s.progress.message : s.progress.message);
  }
  return p;
}

v1::JobStatus ToJobStatusProto(const JobSnapshot& s) {
  v1::JobStatus status;
  status.set_job_id(s.id);
  status.set_state(static_cast<v1::JobState>(static_cast<int>(s.state)));
  *status.mutable_last_progress() = ToProgressProto(s);
  status.set_error_message(ErrorText(s));
  status.set_created_unix_ms(absl::ToUnixMillis(s.created));
  status.set_updated_unix_ms(absl::ToUnixMillis(s.updated));
  return status;
}

absl::StatusOr<v1::JobStatus> GetJobStatus(const JobRegistry& registry, const std::string& job_id) {
  absl::StatusOr<std::shared_ptr<Job>> job = registry.Get(job_id);
  if (!job.ok()) return job.status();
  return ToJobStatusProto((*job)->Snapshot());
}

absl::StatusOr<v1::JobStatus> RequestJobCancel(const JobRegistry& registry, const std::string& job_id,
                                               const char* service) {
  absl::StatusOr<std::shared_ptr<Job>> job = registry.Get(job_id);
  if (!job.ok()) return job.status();
  (*job)->RequestCancel();
  TESSERA_LOG(INFO) << service << ": job " << (*job)->id() << " cancellation requested";
  return ToJobStatusProto((*job)->Snapshot());
}

}  // namespace tessera::jobs
