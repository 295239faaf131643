#include "services/jobs/job_core.h"

#include <chrono>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status.h"
#include "common/text_checks.h"
#include "services/jobs/job_types.h"
#include "services/jobs/request_fingerprint.h"
#include "services/scheduler/job_info.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::jobs {

namespace fs = std::filesystem;
using scheduler::Scheduler;
using scheduler::ToJobInfo;

// ---------------------------------------------------------------- as the APIs show jobs

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

absl::Status CheckSucceeded(const JobRecord& job) {
  switch (job.state) {
    case JobState::kQueued:
    case JobState::kRunning:
      return absl::FailedPreconditionError(absl::StrCat("job '", job.job_id, "' is ", JobStateName(job.state),
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

bool UnpackJobSpec(const JobRecord& job, google::protobuf::Message* request) {
  v1::JobSpec spec;
  return spec.ParseFromString(job.spec) && spec.spec().UnpackTo(request);
}

// ---------------------------------------------------------------- upload files

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

// ---------------------------------------------------------------- the core

JobCore::JobCore(JobCoreOptions options) : options_(std::move(options)) {}

absl::Status JobCore::Attach(Scheduler* scheduler, const std::string& state_dir) {
  if (scheduler == nullptr) return absl::InvalidArgumentError("no scheduler");
  if (scheduler_.load() != nullptr) return absl::FailedPreconditionError("a scheduler is already attached");
  if (options_.uploads.dir.subdir != nullptr) {
    TESSERA_ASSIGN_OR_RETURN(upload_dir_, options_.uploads.dir.Create(state_dir));
  }
  scheduler_.store(scheduler);
  MaybeSweepUploads();
  return absl::OkStatus();
}

absl::StatusOr<Scheduler*> JobCore::scheduler() const {
  Scheduler* s = scheduler_.load();
  if (s == nullptr) {
    return absl::FailedPreconditionError("this process is a worker; submit jobs to the scheduler (SchedulerService)");
  }
  return s;
}

absl::StatusOr<std::optional<JobRecord>> JobCore::Known(const JobCaller& caller, const std::string& request_id,
                                                        const char* id_field, const std::string& fingerprint) const {
  TESSERA_ASSIGN_OR_RETURN(Scheduler * s, scheduler());
  absl::StatusOr<JobRecord> job = s->FindSameRequest(request_id, fingerprint, id_field, OwnerOf(caller.identity));
  if (!job.ok()) {
    if (job.status().code() == absl::StatusCode::kNotFound) return std::optional<JobRecord>();
    return job.status();
  }
  if (job->kind != options_.kind.kind) {  // a job stored before fingerprints
    return absl::AlreadyExistsError(
        absl::StrCat(id_field, " '", request_id, "' already names a ", job->kind, " job (", job->job_id, ")"));
  }
  return std::optional<JobRecord>(*std::move(job));
}

absl::StatusOr<SubmittedJob> JobCore::Submit(const JobSubmission& submission) {
  TESSERA_ASSIGN_OR_RETURN(Scheduler * s, scheduler());
  const std::string& id = submission.request_id;
  if (!id.empty()) TESSERA_RETURN_IF_ERROR(Annotate(ValidateJobId(id), submission.id_field));
  const std::string fingerprint = RequestFingerprint(*submission.request);
  // Idempotency before any check or side effect: a retry whose first answer
  // was lost gets its job even when the request would not pass now.
  if (!id.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::optional<JobRecord> known,
                             Known(submission.caller, id, submission.id_field, fingerprint));
    if (known) return SubmittedJob{ToJobInfo(*known), false};
  }
  v1::JobInfo info;
  {
    // Shared among submits (exclusive with serialize_submits); the sweep
    // takes it exclusive, so it never runs between prepare's files and the job.
    std::shared_lock<std::shared_mutex> shared(submit_mu_, std::defer_lock);
    std::unique_lock<std::shared_mutex> exclusive(submit_mu_, std::defer_lock);
    if (options_.serialize_submits) {
      exclusive.lock();
      if (!id.empty()) {  // the same request_id may have committed meanwhile
        TESSERA_ASSIGN_OR_RETURN(std::optional<JobRecord> known,
                                 Known(submission.caller, id, submission.id_field, fingerprint));
        if (known) return SubmittedJob{ToJobInfo(*known), false};
      }
    } else {
      shared.lock();
    }
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<google::protobuf::Message> spec, submission.prepare());
    v1::SubmitJobRequest submit;
    submit.mutable_spec()->set_kind(options_.kind.kind);
    submit.mutable_spec()->mutable_spec()->PackFrom(*spec);
    submit.set_request_id(id);
    scheduler::SubmitOptions options;
    options.request_fingerprint = fingerprint;
    options.require_gpu_worker = true;
    options.id_field = submission.id_field;
    options.owner = OwnerOf(submission.caller.identity);
    options.gallery = submission.caller.identity.gallery;
    TESSERA_ASSIGN_OR_RETURN(info, s->Submit(submit, options));
  }
  TESSERA_LOG(INFO) << options_.kind.noun << ": job " << info.job_id()
                    << (id.empty() ? "" : absl::StrCat(" (", id, ")")) << " submitted";
  MaybeSweepUploads();
  return SubmittedJob{std::move(info), true};
}

absl::StatusOr<JobRecord> JobCore::Find(const JobCaller& caller, const std::string& id) const {
  if (id.empty()) return absl::InvalidArgumentError("job_id is empty");
  TESSERA_ASSIGN_OR_RETURN(Scheduler * s, scheduler());
  const absl::Status not_found =
      absl::NotFoundError(absl::StrCat("no ", options_.kind.noun, " job ", QuoteBounded(id, 64)));
  absl::StatusOr<JobRecord> job = s->store().Get(id);
  if (!job.ok() && job.status().code() == absl::StatusCode::kNotFound) {
    // The id a client gave its submit is the job's request_id.
    job = s->store().FindByRequestId(id);
    if (!job.ok() && job.status().code() == absl::StatusCode::kNotFound) return not_found;
  }
  if (!job.ok()) return job.status();
  TESSERA_RETURN_IF_ERROR(CheckJobVisible(caller, *job, not_found));
  if (job->kind != options_.kind.kind) {
    return absl::NotFoundError(
        absl::StrCat("job ", QuoteBounded(id, 64), " is a ", job->kind, " job, not a ", options_.kind.noun, " job"));
  }
  return job;
}

absl::StatusOr<v1::JobStatus> JobCore::Get(const JobCaller& caller, const std::string& id) const {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, Find(caller, id));
  return ToJobStatus(ToJobInfo(job));
}

absl::StatusOr<v1::JobStatus> JobCore::Cancel(const JobCaller& caller, const std::string& id) const {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, Find(caller, id));
  TESSERA_ASSIGN_OR_RETURN(v1::JobInfo info, (*scheduler())->Cancel(job.job_id));
  return ToJobStatus(info);
}

absl::Status JobCore::Watch(const JobCaller& caller, const std::string& id, const std::function<bool()>& stopped,
                            const std::function<bool(const v1::Progress&)>& write) const {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, Find(caller, id));
  Scheduler* s = *scheduler();
  const v1::JobInfo info = ToJobInfo(job);
  if (!write(ProgressOf(info))) return absl::UnavailableError("the watcher stopped receiving");
  if (IsEnded(info.state())) return absl::OkStatus();
  // Then every event after it (progress is recorded a few times a second).
  return s->Watch(
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
      stopped);
}

absl::StatusOr<v1::JobResult> JobCore::Result(const JobCaller& caller, const std::string& id) const {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, Find(caller, id));
  TESSERA_RETURN_IF_ERROR(CheckSucceeded(job));
  return (*scheduler())->GetResult(job.job_id);
}

absl::StatusOr<std::string> JobCore::ResultFile(const v1::JobResult& result, absl::string_view name) {
  for (const v1::ResultFile& f : result.files()) {
    if (f.name() == name) return f.path();
  }
  return absl::DataLossError(absl::StrCat("job '", result.job_id(), "' has no result file ", name));
}

absl::StatusOr<std::vector<JobRecord>> JobCore::Pending() const {
  TESSERA_ASSIGN_OR_RETURN(Scheduler * s, scheduler());
  JobFilter filter;
  filter.states = {JobState::kQueued, JobState::kRunning};
  filter.kind = options_.kind.kind;
  filter.limit = 1000000;
  return s->store().List(filter);
}

absl::StatusOr<int> JobCore::SweepUploads() {
  TESSERA_RETURN_IF_ERROR(scheduler().status());
  if (upload_dir_.empty() || !options_.uploads.named_files) return 0;
  // Not between a submit's writing of its files and its job.
  std::unique_lock<std::shared_mutex> exclusive(submit_mu_);
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRecord> pending, Pending());
  std::set<std::string> named;  // files of jobs that may still run
  for (const JobRecord& job : pending) {
    for (std::string& path : options_.uploads.named_files(job)) named.insert(std::move(path));
  }
  return RemoveUnnamedUploadFiles(upload_dir_, options_.uploads.dir.prefix, named, options_.uploads.grace);
}

void JobCore::MaybeSweepUploads() {
  std::unique_lock<std::mutex> lock(sweep_mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;  // another call is sweeping
  const absl::Time now = absl::Now();
  if (now - last_sweep_ < options_.uploads.sweep_interval) return;
  last_sweep_ = now;
  absl::StatusOr<int> removed = SweepUploads();
  if (!removed.ok()) {
    TESSERA_LOG(WARNING) << options_.kind.noun << ": sweeping upload files: " << removed.status();
  } else if (*removed > 0) {
    TESSERA_LOG(INFO) << options_.kind.noun << ": removed " << *removed << " upload file(s) no job needs";
  }
}

}  // namespace tessera::jobs
