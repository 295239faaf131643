#include "services/scheduler/service_jobs.h"

#include <chrono>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status.h"
#include "services/jobs/job_types.h"
#include "services/scheduler/job_info.h"
#include "services/server/call_checks.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::scheduler {

namespace fs = std::filesystem;
using jobs::JobRecord;
using jobs::JobState;

bool IsEnded(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED || state == v1::JOB_STATE_CANCELLED;
}

v1::Progress ProgressOf(const v1::JobInfo& info) {
  v1::Progress p = info.last_progress();
  p.set_job_id(info.job_id());
  p.set_state(info.state());
  switch (info.state()) {
    case v1::JOB_STATE_SUCCEEDED:
      p.set_fraction(1.0);
      p.set_message("succeeded");
      break;
    case v1::JOB_STATE_FAILED:
    case v1::JOB_STATE_CANCELLED:
      p.set_message(info.error_message());
      break;
    default:
      if (info.cancel_requested()) p.set_message(absl::StrCat("cancelling: ", p.message()));
  }
  return p;
}

v1::JobStatus ToJobStatus(const v1::JobInfo& info) {
  v1::JobStatus status;
  status.set_job_id(info.job_id());
  status.set_state(info.state());
  *status.mutable_last_progress() = ProgressOf(info);
  status.set_error_message(info.error_message());
  status.set_created_unix_ms(info.created_unix_ms());
  status.set_updated_unix_ms(info.updated_unix_ms());
  return status;
}

absl::StatusOr<Scheduler*> RequireScheduler(Scheduler* scheduler) {
  if (scheduler == nullptr) {
    return absl::FailedPreconditionError("this process is a worker; submit jobs to the scheduler (SchedulerService)");
  }
  return scheduler;
}

absl::Status CheckAttachable(const Scheduler* scheduler, const Scheduler* attached) {
  if (scheduler == nullptr) return absl::InvalidArgumentError("no scheduler");
  if (attached != nullptr) return absl::FailedPreconditionError("a scheduler is already attached");
  return absl::OkStatus();
}

absl::Status CheckSucceeded(const JobRecord& job) {
  switch (job.state) {
    case JobState::kQueued:
    case JobState::kRunning:
      return absl::FailedPreconditionError(absl::StrCat("job '", job.job_id, "' is ", jobs::JobStateName(job.state),
                                                        "; its result is ready once it has SUCCEEDED (WatchJob)"));
    case JobState::kCancelled:
      return absl::FailedPreconditionError(absl::StrCat("job '", job.job_id, "' was cancelled; it has no result"));
    case JobState::kFailed: {
      // The job's own error (e.g. INVALID_ARGUMENT for NaN voxels).
      const auto code = static_cast<absl::StatusCode>(job.error_code);
      return absl::Status(code == absl::StatusCode::kOk ? absl::StatusCode::kUnknown : code,
                          absl::StrCat("job '", job.job_id, "' failed: ", job.error_message));
    }
    case JobState::kSucceeded:
      break;
  }
  return absl::OkStatus();
}

absl::Status CheckGpuWorker(Scheduler& scheduler) {
  for (const v1::WorkerInfo& worker : scheduler.Workers()) {
    for (const v1::WorkerDevice& device : worker.devices()) {
      if (device.name() != "cpu") return absl::OkStatus();
    }
  }
  return absl::FailedPreconditionError(
      "options.device is \"cuda\" but no worker of this scheduler has a CUDA GPU; use \"auto\" or \"cpu\"");
}

absl::Status WithRetryPushback(grpc::ServerContext& context, absl::Status status) {
  if (status.code() == absl::StatusCode::kResourceExhausted) {
    // gRPC's retry policy reads this trailer (gRFC A6): the server's hint.
    context.AddTrailingMetadata("grpc-retry-pushback-ms", "2000");
  }
  return status;
}

absl::StatusOr<JobRecord> FindJob(Scheduler* scheduler, const std::string& id, const ServiceJobKind& kind) {
  if (id.empty()) return absl::InvalidArgumentError("job_id is empty");
  TESSERA_ASSIGN_OR_RETURN(Scheduler * s, RequireScheduler(scheduler));
  absl::StatusOr<JobRecord> job = s->store().Get(id);
  if (!job.ok() && job.status().code() == absl::StatusCode::kNotFound) {
    // The id a client gave its submit is the job's request_id.
    job = s->store().FindByRequestId(id);
    if (!job.ok() && job.status().code() == absl::StatusCode::kNotFound) {
      return absl::NotFoundError(absl::StrCat("no ", kind.noun, " job '", id, "'"));
    }
  }
  if (!job.ok()) return job.status();
  if (job->kind != kind.kind) {
    return absl::NotFoundError(absl::StrCat("job '", id, "' is a ", job->kind, " job, not a ", kind.noun, " job"));
  }
  return job;
}

absl::Status GetJobStatus(Scheduler* scheduler, const std::string& id, const ServiceJobKind& kind,
                          v1::JobStatus* response) {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, FindJob(scheduler, id, kind));
  *response = ToJobStatus(ToJobInfo(job));
  return absl::OkStatus();
}

absl::Status CancelJob(Scheduler* scheduler, const std::string& id, const ServiceJobKind& kind,
                       v1::JobStatus* response) {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, FindJob(scheduler, id, kind));
  TESSERA_ASSIGN_OR_RETURN(v1::JobInfo info, scheduler->Cancel(job.job_id));
  *response = ToJobStatus(info);
  return absl::OkStatus();
}

absl::Status WatchJobProgress(Scheduler* scheduler, const std::string& id, const ServiceJobKind& kind,
                              const grpc::ServerContextBase& context,
                              const std::function<bool(const v1::Progress&)>& write) {
  TESSERA_ASSIGN_OR_RETURN(Scheduler * s, RequireScheduler(scheduler));
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, FindJob(scheduler, id, kind));
  const v1::JobInfo info = ToJobInfo(job);
  if (!write(ProgressOf(info))) {
    return StatusAfterFailedIo(context, absl::UnavailableError("the watcher stopped receiving"));
  }
  if (IsEnded(info.state())) return absl::OkStatus();
  // Then every event after it (progress is recorded a few times a second).
  absl::Status status = s->Watch(
      job.job_id, info.last_sequence(),
      [&](const v1::JobEvent& event) {
        v1::Progress progress = event.progress();
        progress.set_job_id(job.job_id);
        progress.set_state(event.state());
        if (IsEnded(event.state())) {
          absl::StatusOr<v1::JobInfo> ended = s->Get(job.job_id);
          progress = ended.ok() ? ProgressOf(*ended) : progress;
          if (!ended.ok()) progress.set_message(event.message());
        }
        return write(progress);
      },
      [&] { return context.IsCancelled(); });
  if (!status.ok() && context.IsCancelled()) status = CheckNotCancelled(context);
  return status;
}

absl::StatusOr<std::vector<JobRecord>> PendingJobs(Scheduler& scheduler, const std::string& kind) {
  jobs::JobFilter filter;
  filter.states = {JobState::kQueued, JobState::kRunning};
  filter.kind = kind;
  filter.limit = 1000000;
  return scheduler.store().List(filter);
}

bool UnpackJobSpec(const JobRecord& job, google::protobuf::Message* request) {
  v1::JobSpec spec;
  return spec.ParseFromString(job.spec) && spec.spec().UnpackTo(request);
}

absl::StatusOr<v1::JobInfo> SubmitJob(Scheduler& scheduler, grpc::ServerContext& context, const std::string& kind,
                                      const google::protobuf::Message& spec, const std::string& request_id) {
  v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_kind(kind);
  submit.mutable_spec()->mutable_spec()->PackFrom(spec);
  submit.set_request_id(request_id);
  absl::StatusOr<v1::JobInfo> info = scheduler.Submit(submit);
  if (!info.ok()) return WithRetryPushback(context, info.status());
  return info;
}

std::string StateSubdir(const std::string& state_dir, const std::string& name) {
  return (fs::path(state_dir) / name).string();
}

absl::StatusOr<std::string> CreateStateSubdir(const std::string& state_dir, const std::string& name,
                                              absl::string_view what) {
  if (state_dir.empty()) return absl::InvalidArgumentError("the state directory is empty");
  const fs::path dir = StateSubdir(state_dir, name);
  std::error_code ec;
  fs::create_directories(dir, ec);
  fs::path canonical = ec ? fs::path() : fs::canonical(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the ", what, " ", dir.string(), ": ", ec.message()));
  }
  return canonical.string();
}

bool ReuseUploadFiles(const std::vector<std::string>& files) {
  std::error_code ec;
  if (files.empty() || !fs::exists(files.back(), ec)) return false;
  const fs::file_time_type now = fs::file_time_type::clock::now();
  for (const std::string& path : files) {
    if (path.empty()) continue;
    fs::last_write_time(path, now, ec);
    if (ec) return false;
  }
  return true;
}

absl::StatusOr<int> RemoveUnnamedUploadFiles(const std::string& dir, absl::string_view prefix,
                                             const std::set<std::string>& named, absl::Duration grace) {
  const auto grace_ticks =
      std::chrono::duration_cast<fs::file_time_type::duration>(absl::ToChronoNanoseconds(grace));
  const fs::file_time_type now = fs::file_time_type::clock::now();
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& path = it->path();
    if (!absl::StartsWith(path.filename().string(), prefix) || named.count(path.string()) > 0) continue;
    std::error_code file_ec;
    const fs::file_time_type written = fs::last_write_time(path, file_ec);
    if (file_ec || now - written < grace_ticks) continue;
    if (fs::remove(path, file_ec)) ++removed;
  }
  if (ec) return absl::InternalError(absl::StrCat("listing ", dir, ": ", ec.message()));
  return removed;
}

UploadSweepThrottle::UploadSweepThrottle(std::string service, absl::Duration interval)
    : service_(std::move(service)), interval_(interval) {}

void UploadSweepThrottle::MaybeSweep(const std::function<absl::StatusOr<int>()>& sweep) {
  std::unique_lock<std::mutex> lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another call is sweeping
  const absl::Time now = absl::Now();
  if (now - last_ < interval_) return;
  last_ = now;
  absl::StatusOr<int> removed = sweep();
  if (!removed.ok()) {
    TESSERA_LOG(WARNING) << service_ << ": sweeping upload files: " << removed.status();
  } else if (*removed > 0) {
    TESSERA_LOG(INFO) << service_ << ": removed " << *removed << " upload file(s) no job needs";
  }
}

}  // namespace tessera::scheduler
