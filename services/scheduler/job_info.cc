#include "services/scheduler/job_info.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera::scheduler {

v1::JobInfo ToJobInfo(const jobs::JobRecord& job) {
  v1::JobInfo out;
  out.set_job_id(job.job_id);
  out.set_request_id(job.request_id);
  out.set_kind(job.kind);
  out.set_state(static_cast<v1::JobState>(job.state));
  out.set_priority(job.priority);
  if (!job.last_progress.empty()) out.mutable_last_progress()->ParseFromString(job.last_progress);
  out.mutable_last_progress()->set_job_id(job.job_id);
  out.mutable_last_progress()->set_state(out.state());
  if (job.state == jobs::JobState::kFailed || job.state == jobs::JobState::kCancelled) {
    out.set_error_code(job.error_code);
    out.set_error_message(
        absl::Status(static_cast<absl::StatusCode>(job.error_code), job.error_message).ToString());
  }
  out.set_created_unix_ms(job.created_ms);
  out.set_updated_unix_ms(job.updated_ms);
  out.set_started_unix_ms(job.started_ms);
  out.set_finished_unix_ms(job.finished_ms);
  out.set_deadline_unix_ms(job.deadline_ms);
  out.set_attempts(job.attempts);
  out.set_max_attempts(job.max_attempts);
  out.set_worker(job.worker);
  out.set_last_sequence(job.last_sequence);
  out.set_cancel_requested(job.cancel_requested);
  if (job.started_ms > 0) out.set_queue_seconds((job.started_ms - job.created_ms) / 1000.0);
  if (job.started_ms > 0 && job.finished_ms >= job.started_ms) {
    out.set_compute_seconds((job.finished_ms - job.started_ms) / 1000.0);
  }
  out.set_peak_device_bytes(job.peak_device_bytes);
  out.set_owner(job.owner);
  out.set_gallery(job.gallery);
  out.set_results_deleted_unix_ms(job.deleted_ms);
  out.set_results_deleted_reason(job.deleted_reason);
  out.set_trace_id(job.trace_id);
  return out;
}

v1::JobEvent ToJobEvent(const jobs::StoredEvent& event, const std::string& trace_id) {
  v1::JobEvent out;
  out.set_job_id(event.job_id);
  out.set_sequence(event.sequence);
  out.set_unix_ms(event.unix_ms);
  out.set_state(static_cast<v1::JobState>(event.state));
  if (!event.progress.empty()) out.mutable_progress()->ParseFromString(event.progress);
  out.mutable_progress()->set_job_id(event.job_id);
  out.mutable_progress()->set_state(out.state());
  out.set_message(event.message);
  out.set_trace_id(trace_id);
  return out;
}

v1::Progress ToProgress(const std::string& job_id, jobs::JobState state, const jobs::JobProgress& p) {
  v1::Progress out;
  out.set_job_id(job_id);
  out.set_state(static_cast<v1::JobState>(state));
  out.set_stage(p.stage);
  out.set_step(p.step);
  out.set_total_steps(p.total_steps);
  out.set_fraction(p.fraction);
  for (const auto& [name, value] : p.metrics) (*out.mutable_metrics())[name] = value;
  out.set_message(p.message);
  return out;
}

jobs::JobProgress FromProgress(const v1::Progress& p) {
  jobs::JobProgress out;
  out.stage = p.stage();
  out.step = p.step();
  out.total_steps = p.total_steps();
  out.fraction = p.fraction();
  for (const auto& [name, value] : p.metrics()) out.metrics[name] = value;
  out.message = p.message();
  return out;
}

}  // namespace tessera::scheduler
