// What a service that runs its long work as scheduler jobs of one kind
// (RegistrationService: "registration", SomAtlasService: "som.train") needs
// around the Scheduler, so that each such service is a thin adapter:
//
//   - its jobs as these APIs show them (tessera.v1.JobStatus / Progress:
//     ToJobStatus, ProgressOf) and GetJob / CancelJob over them;
//   - finding a job of its kind by scheduler job id or the client's request
//     id (FindJob), the queued and running jobs of the kind (PendingJobs) and
//     their stored requests (UnpackJobSpec);
//   - the statuses every such service answers alike: a scheduler attached
//     twice (CheckAttachable), a worker process (RequireScheduler:
//     FAILED_PRECONDITION naming SchedulerService), why a job has no result
//     (CheckSucceeded), a request for a GPU no worker has (CheckGpuWorker), a
//     full queue (SubmitJob / WithRetryPushback: gRPC's retry-pushback
//     trailer, as SchedulerService.Submit sends it);
//   - the files a service writes under the state directory for the uploads
//     its jobs name: the folder (CreateStateSubdir), reusing an upload's files
//     for another job (ReuseUploadFiles), and deleting those no pending job
//     names once untouched for a grace period (RemoveUnnamedUploadFiles, run
//     now and then through an UploadSweepThrottle).
//
//   constexpr scheduler::ServiceJobKind kJob{"registration", "registration"};
//   grpc::Status RegistrationServiceImpl::GetJob(..., const v1::JobRequest* request, v1::JobStatus* response) {
//     return ToGrpcStatus(scheduler::GetJobStatus(scheduler_.load(), request->job_id(), kJob, response));
//   }
//
// A null Scheduler* stands for a process without a scheduler (`tessera serve
// --role worker`).
#ifndef TESSERA_SERVICES_SCHEDULER_SERVICE_JOBS_H_
#define TESSERA_SERVICES_SCHEDULER_SERVICE_JOBS_H_

#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <grpcpp/server_context.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "services/jobs/job_store.h"
#include "services/scheduler/scheduler.h"
#include "tessera/v1/common.pb.h"
#include "tessera/v1/jobs.pb.h"

namespace tessera::scheduler {

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

// ---------------------------------------------------------------- statuses

// `scheduler`, or FAILED_PRECONDITION when it is null: this process is a
// worker, and jobs go to the scheduler (SchedulerService).
absl::StatusOr<Scheduler*> RequireScheduler(Scheduler* scheduler);

// Whether a service whose scheduler is `attached` (null: none yet) may attach
// `scheduler`: INVALID_ARGUMENT when it is null, FAILED_PRECONDITION when one
// is attached already (a service attaches its scheduler once).
absl::Status CheckAttachable(const Scheduler* scheduler, const Scheduler* attached);

// OK for a SUCCEEDED job; otherwise why it has no result: FAILED_PRECONDITION
// while it is queued or running or when it was cancelled, the job's own error
// (its code; UNKNOWN without one) when it failed.
absl::Status CheckSucceeded(const jobs::JobRecord& job);

// OK when a worker of the scheduler has a device other than the CPU;
// otherwise the FAILED_PRECONDITION of a request for options.device "cuda".
absl::Status CheckGpuWorker(Scheduler& scheduler);

// `status`, after adding gRPC's retry-pushback trailer to the call when it is
// RESOURCE_EXHAUSTED (a full queue), as SchedulerService.Submit does.
absl::Status WithRetryPushback(grpc::ServerContext& context, absl::Status status);

// ---------------------------------------------------------------- jobs of a kind

// The job of `kind` that `id` names: a scheduler job id, else a request id
// (the id a client gave its submit). INVALID_ARGUMENT when `id` is empty,
// FAILED_PRECONDITION without a scheduler, NOT_FOUND when no job of the kind
// has that id (also when a job of another kind has it).
absl::StatusOr<jobs::JobRecord> FindJob(Scheduler* scheduler, const std::string& id, const ServiceJobKind& kind);

// GetJob / CancelJob of a service: the job FindJob finds, as JobStatus
// (CancelJob: Scheduler::Cancel first; cancelling an ended job is harmless).
absl::Status GetJobStatus(Scheduler* scheduler, const std::string& id, const ServiceJobKind& kind,
                          v1::JobStatus* response);
absl::Status CancelJob(Scheduler* scheduler, const std::string& id, const ServiceJobKind& kind,
                       v1::JobStatus* response);

// WatchJob of a service whose progress is tessera.v1.Progress: the job
// FindJob finds, its current progress at once (an ended job's is the only
// message), then one message per event until it ends (the last carries how it
// ended). `write` returns false when the watcher stopped receiving. Stops
// early, without affecting the job, when the call is cancelled.
absl::Status WatchJobProgress(Scheduler* scheduler, const std::string& id, const ServiceJobKind& kind,
                              const grpc::ServerContextBase& context,
                              const std::function<bool(const v1::Progress&)>& write);

// The QUEUED and RUNNING jobs of `kind`.
absl::StatusOr<std::vector<jobs::JobRecord>> PendingJobs(Scheduler& scheduler, const std::string& kind);

// Unpacks the request a job was submitted with (its stored JobSpec) into
// `request`; false when the job holds no such message.
bool UnpackJobSpec(const jobs::JobRecord& job, google::protobuf::Message* request);

// Scheduler::Submit of `spec` as a job of `kind` under the client's
// `request_id` (may be empty); a full queue's RESOURCE_EXHAUSTED carries the
// retry-pushback trailer (WithRetryPushback).
absl::StatusOr<v1::JobInfo> SubmitJob(Scheduler& scheduler, grpc::ServerContext& context, const std::string& kind,
                                      const google::protobuf::Message& spec, const std::string& request_id);

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

// Runs a service's sweep of upload files at most every `interval` (and not
// while another call is sweeping), logging "<service>: ..." what it removed or
// why it could not.
class UploadSweepThrottle {
 public:
  UploadSweepThrottle(std::string service, absl::Duration interval);
  void MaybeSweep(const std::function<absl::StatusOr<int>()>& sweep);

 private:
  const std::string service_;
  const absl::Duration interval_;
  std::mutex mu_;
  absl::Time last_ = absl::InfinitePast();  // guarded by mu_
};

}  // namespace tessera::scheduler

#endif  // TESSERA_SERVICES_SCHEDULER_SERVICE_JOBS_H_
