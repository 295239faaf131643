// The job core every job-running service shares (RegistrationService,
// ReconstructionService, SomAtlasService, and whatever comes next): the
// service keeps only the mapping from its proto to the engine's spec, and
// calls one JobCore for everything its job RPCs do:
//
//   Submit    idempotent: a request_id already known is decided first, before
//             any check of the request or any side effect — the same request
//             (RequestFingerprint) gets the existing job whatever its state;
//             a different one ALREADY_EXISTS naming the id. Only a new job
//             runs the service's `prepare` (checks, upload files written, the
//             durable spec) and is submitted to the scheduler.
//   Find      a job of this service's kind by scheduler job id or request id
//   Get / Cancel / Watch / Result / ResultFile
//   uploads   the state sub-directory the service's upload files live in,
//             and the sweep that deletes those no pending job names
//
// Plain C++: no gRPC types (services/jobs/job_rpcs.h is the gRPC edge).
// Every call names its caller (JobCaller): a job records its submitter and
// gallery, and only those job_access.h allows see it; to anyone else it does
// not exist (NOT_FOUND). One place, so every service gets the same checks.
//
//   jobs::JobCore core({"registration", "registration"}, upload_options);
//   TESSERA_RETURN_IF_ERROR(core.Attach(scheduler, state_dir));
//   TESSERA_ASSIGN_OR_RETURN(jobs::SubmittedJob job, core.Submit({&request, request.job_id(), "job_id",
//       [&] { return DurableRequest(request); }}));
#ifndef TESSERA_SERVICES_JOBS_JOB_CORE_H_
#define TESSERA_SERVICES_JOBS_JOB_CORE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include <google/protobuf/message.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/jobs/job_access.h"
#include "services/jobs/job_store.h"
#include "services/scheduler/scheduler.h"
#include "tessera/v1/common.pb.h"
#include "tessera/v1/jobs.pb.h"

namespace tessera::jobs {

// A service's kind of job.
struct ServiceJobKind {
  const char* kind;  // the engine's: "registration", "som.train"
  const char* noun;  // in messages: "no <noun> job 'x'", "not a <noun> job"
};

// ---------------------------------------------------------------- as the APIs show jobs

// SUCCEEDED, FAILED or CANCELLED.
bool IsEnded(v1::JobState state);

// A job's progress as JobStatus and WatchJob show it: its last progress with
// its id and state; for an ended job the message says how it ended
// ("succeeded", with fraction 1, or the error as "CODE: message"); while a
// cancel is pending it starts "cancelling: ".
v1::Progress ProgressOf(const v1::JobInfo& info);

// tessera.v1.JobStatus of a job (last_progress: ProgressOf).
v1::JobStatus ToJobStatus(const v1::JobInfo& info);

// OK for a SUCCEEDED job; otherwise why it has no result: FAILED_PRECONDITION
// while it is queued or running or when it was cancelled, the job's own error
// (its code; UNKNOWN without one) when it failed.
absl::Status CheckSucceeded(const JobRecord& job);

// Unpacks the request a job was submitted with (its stored JobSpec) into
// `request`; false when the job holds no such message.
bool UnpackJobSpec(const JobRecord& job, google::protobuf::Message* request);

// ---------------------------------------------------------------- upload files

// <state_dir>/<name>.
std::string StateSubdir(const std::string& state_dir, const std::string& name);
// Creates StateSubdir(state_dir, name) and returns its canonical path.
// INVALID_ARGUMENT when state_dir is empty; FAILED_PRECONDITION ("cannot
// create the <what> <dir>: ...") when it cannot be made.
absl::StatusOr<std::string> CreateStateSubdir(const std::string& state_dir, const std::string& name,
                                              absl::string_view what);

// Whether the files of an upload, written for an earlier job, are all there
// (uploads do not change, so they serve the next job as they are). Each is
// touched, so that a sweep leaves them to the job about to be submitted.
// `files` in the order they are written: the last, written last, is looked at
// first. Empty paths are skipped.
bool ReuseUploadFiles(const std::vector<std::string>& files);

// Deletes the files in `dir` whose names start with `prefix`, whose paths are
// not in `named` (the files of jobs that may still run) and that have not been
// written or touched for `grace`; returns how many. INTERNAL when `dir` cannot
// be listed.
absl::StatusOr<int> RemoveUnnamedUploadFiles(const std::string& dir, absl::string_view prefix,
                                             const std::set<std::string>& named, absl::Duration grace);

// ---------------------------------------------------------------- the core

// Where a service keeps the files its jobs' uploads became: one constant per
// service, for the core and for whoever else names the folder (the engine's
// data roots).
struct UploadDir {
  const char* subdir = nullptr;  // under the state directory: "uploads"; null: none
  const char* what = "";         // in messages: "upload directory"
  const char* prefix = "";       // every upload file's name starts with it ("up-")

  std::string Path(const std::string& state_dir) const { return StateSubdir(state_dir, subdir); }
  absl::StatusOr<std::string> Create(const std::string& state_dir) const {
    return CreateStateSubdir(state_dir, subdir, what);
  }
};

// A service's upload files, and how long they are kept.
struct UploadFilesOptions {
  UploadDir dir;
  // Files no queued or running job names are deleted once untouched this long
  // (a client may upload, then submit a little later).
  absl::Duration grace = absl::Minutes(10);
  absl::Duration sweep_interval = absl::Minutes(1);
  // The server files a stored spec names (a pending job's), so the sweep
  // leaves them.
  std::function<std::vector<std::string>(const JobRecord& job)> named_files;
};

struct JobCoreOptions {
  ServiceJobKind kind;
  UploadFilesOptions uploads;
  // Whether submits run one at a time (SOM: an atlas id is checked against
  // the pending jobs, then submitted). Others only exclude the sweep.
  bool serialize_submits = false;
};

// The spec a service's `prepare` made (its durable request), as
// JobSubmission::prepare returns it.
template <typename M>
absl::StatusOr<std::unique_ptr<google::protobuf::Message>> SpecOf(absl::StatusOr<M> spec) {
  if (!spec.ok()) return spec.status();
  return std::unique_ptr<google::protobuf::Message>(new M(*std::move(spec)));
}

// A new job's submit as the service hands it over.
struct JobSubmission {
  JobCaller caller;                                    // its owner; its gallery (identity.gallery)
  const google::protobuf::Message* request = nullptr;  // as the client sent it
  std::string request_id;                              // its idempotency key; may be empty
  const char* id_field = "request_id";                 // the request's name for that key, in messages
  // Only for a new job, after idempotency is decided: the request's checks
  // and side effects (upload files written), returning the spec to store.
  std::function<absl::StatusOr<std::unique_ptr<google::protobuf::Message>>()> prepare;
};

struct SubmittedJob {
  v1::JobInfo info;
  bool created = false;  // false: the request_id named this existing job
};

class JobCore {
 public:
  explicit JobCore(JobCoreOptions options);
  JobCore(const JobCore&) = delete;
  JobCore& operator=(const JobCore&) = delete;

  // Attaches the scheduler (once: FAILED_PRECONDITION the second time;
  // INVALID_ARGUMENT when null) and creates the upload directory under
  // `state_dir`, sweeping it once.
  absl::Status Attach(scheduler::Scheduler* scheduler, const std::string& state_dir);
  // The scheduler, or FAILED_PRECONDITION naming SchedulerService: a process
  // without one (`tessera serve --role worker`) takes no jobs.
  absl::StatusOr<scheduler::Scheduler*> scheduler() const;
  // Canonical path of the upload directory ("" before Attach or without one).
  const std::string& upload_dir() const { return upload_dir_; }
  const ServiceJobKind& kind() const { return options_.kind; }

  absl::StatusOr<SubmittedJob> Submit(const JobSubmission& submission);

  // The job of this kind that `id` names: a scheduler job id, else a request
  // id. INVALID_ARGUMENT when empty, NOT_FOUND when no job of this kind has it
  // or `caller` may not see it (MaySeeJob; the same message).
  absl::StatusOr<JobRecord> Find(const JobCaller& caller, const std::string& id) const;
  absl::StatusOr<v1::JobStatus> Get(const JobCaller& caller, const std::string& id) const;
  // Cancelling an ended job is harmless (its status comes back unchanged).
  absl::StatusOr<v1::JobStatus> Cancel(const JobCaller& caller, const std::string& id) const;
  // The job's progress at once (an ended job's is the only message), then one
  // message per event until it ends (the last says how). `write` returns
  // false when the watcher stopped receiving (UNAVAILABLE); `stopped` true
  // when the call was cancelled (CANCELLED). Never affects the job.
  absl::Status Watch(const JobCaller& caller, const std::string& id, const std::function<bool()>& stopped,
                     const std::function<bool(const v1::Progress&)>& write) const;
  // A succeeded job's result (FAILED_PRECONDITION / the job's error otherwise).
  absl::StatusOr<v1::JobResult> Result(const JobCaller& caller, const std::string& id) const;
  // The engine's typed result of a succeeded job, its job_id set; DATA_LOSS
  // when the stored result is not a `R`.
  template <typename R>
  absl::StatusOr<R> TypedResult(const JobCaller& caller, const std::string& id) const;
  // The server path of result file `name`; DATA_LOSS when the job has none.
  static absl::StatusOr<std::string> ResultFile(const v1::JobResult& result, absl::string_view name);

  // The QUEUED and RUNNING jobs of this kind.
  absl::StatusOr<std::vector<JobRecord>> Pending() const;
  // Runs the upload sweep unless one ran within the sweep interval (or one
  // is running); logs what it removed.
  void MaybeSweepUploads();
  // The sweep itself: how many files it deleted.
  absl::StatusOr<int> SweepUploads();

 private:
  // The job `request_id` names when the request is the same one; nullopt
  // when the id is new; ALREADY_EXISTS when it names another request.
  absl::StatusOr<std::optional<JobRecord>> Known(const JobCaller& caller, const std::string& request_id,
                                                 const char* id_field, const std::string& fingerprint) const;
  const JobCoreOptions options_;
  std::atomic<scheduler::Scheduler*> scheduler_{nullptr};
  std::string upload_dir_;  // set once by Attach
  // Submits hold it shared (exclusive with serialize_submits), the sweep
  // exclusive: never between a submit's writing of its files and its job.
  std::shared_mutex submit_mu_;
  std::mutex sweep_mu_;
  absl::Time last_sweep_ = absl::InfinitePast();  // guarded by sweep_mu_
};

template <typename R>
absl::StatusOr<R> JobCore::TypedResult(const JobCaller& caller, const std::string& id) const {
  absl::StatusOr<v1::JobResult> result = Result(caller, id);
  if (!result.ok()) return result.status();
  R typed;
  if (!result->result().UnpackTo(&typed)) {
    return absl::DataLossError(
        absl::StrCat("job '", result->job_id(), "' has no ", R::descriptor()->name(), " result"));
  }
  typed.set_job_id(result->job_id());
  return typed;
}

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_JOB_CORE_H_
