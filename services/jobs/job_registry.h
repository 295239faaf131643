// Long-running jobs held in memory: id, state, progress, cancellation,
// error, times and the result, with waiters notified on every change.
// Generic: RegistrationService keeps its jobs here today; the scheduler will
// adopt the same Job/JobRegistry types.
//
// Persistence (SQLite, surviving restarts) is a later issue: the registry is
// the only place jobs are created, looked up and dropped, and every state
// change goes through Job's few transition methods, so a persistent registry
// can write through at those points. Results stay opaque (JobPayload); a
// persistent one would add serialization there.
//
//   JobRegistry registry;
//   bool created = false;
//   TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<Job> job, registry.GetOrCreate("", "registration", &created));
//   // worker thread:
//   if (!job->Start()) return;                 // cancelled while queued
//   job->SetProgress({.stage = "affine", .step = 3});
//   job->Succeed(result);                      // or job->Fail(status)
//   // elsewhere:
//   JobSnapshot s = job->WaitForChange(s.version, absl::Now() + absl::Seconds(1));
#ifndef TESSERA_SERVICES_JOBS_JOB_REGISTRY_H_
#define TESSERA_SERVICES_JOBS_JOB_REGISTRY_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

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

// A finished job's result, owned by the job; services derive their own.
class JobPayload {
 public:
  virtual ~JobPayload() = default;
};

struct JobSnapshot {
  std::string id;
  std::string kind;
  JobState state = JobState::kQueued;
  JobProgress progress;
  int64_t version = 0;            // grows with every change (progress or state)
  absl::Status error;             // non-OK when kFailed or kCancelled
  bool cancel_requested = false;
  absl::Time created;
  absl::Time updated;
  std::shared_ptr<const JobPayload> result;  // when kSucceeded
};

class Job {
 public:
  Job(std::string id, std::string kind);
  Job(const Job&) = delete;
  Job& operator=(const Job&) = delete;

  const std::string& id() const { return id_; }
  const std::string& kind() const { return kind_; }

  // Set once cancellation is requested; for the worker's inner loop (e.g. the
  // `cancel` argument of RunRegistration).
  const std::atomic<bool>* cancel_flag() const { return &cancel_; }
  bool cancel_requested() const { return cancel_.load(); }

  // Worker transitions. Start(): QUEUED -> RUNNING; false when the job has
  // already ended (cancelled while queued) and must not run.
  bool Start();
  // Ignored once the job has ended.
  void SetProgress(JobProgress progress);
  // RUNNING -> SUCCEEDED. Ignored once the job has ended.
  void Succeed(std::shared_ptr<const JobPayload> result);
  // Ends the job: CANCELLED when `error`'s code is CANCELLED, FAILED
  // otherwise (an OK `error` becomes INTERNAL). Ignored once the job has ended.
  void Fail(absl::Status error);

  // A queued job ends CANCELLED at once; a running one gets its cancel flag
  // set and ends when its worker notices. No effect on an ended job.
  void RequestCancel();

  JobSnapshot Snapshot() const;
  // Blocks until version > after_version, the job has ended, or `deadline`;
  // returns the snapshot then. Pass INT64_MAX to wait only for the end.
  JobSnapshot WaitForChange(int64_t after_version, absl::Time deadline) const;

 private:
  void EndLocked(JobState state, absl::Status error, std::shared_ptr<const JobPayload> result);
  JobSnapshot SnapshotLocked() const;

  const std::string id_;
  const std::string kind_;
  std::atomic<bool> cancel_{false};
  mutable std::mutex mu_;
  mutable std::condition_variable changed_;
  JobState state_ = JobState::kQueued;
  JobProgress progress_;
  int64_t version_ = 0;
  absl::Status error_;
  const absl::Time created_;
  absl::Time updated_;
  std::shared_ptr<const JobPayload> result_;
};

struct JobRegistryOptions {
  // Ended jobs (with their results) kept for GetJob/GetResult: at most this
  // many (oldest dropped first), each for at most `finished_ttl`.
  int max_finished_jobs = 64;
  absl::Duration finished_ttl = absl::Hours(1);
};

class JobRegistry {
 public:
  explicit JobRegistry(JobRegistryOptions options = {});
  JobRegistry(const JobRegistry&) = delete;
  JobRegistry& operator=(const JobRegistry&) = delete;

  // 1-128 characters of [A-Za-z0-9._-]; INVALID_ARGUMENT otherwise.
  static absl::Status ValidateJobId(absl::string_view id);

  // The job with `id` when there is one (*created = false; ALREADY_EXISTS
  // when it is of another kind), else a new QUEUED job (*created = true).
  // Empty `id`: a new job with a fresh unique id. Drops expired and excess
  // ended jobs first.
  absl::StatusOr<std::shared_ptr<Job>> GetOrCreate(const std::string& id, const std::string& kind, bool* created);
  // NOT_FOUND for unknown (or dropped) ids.
  absl::StatusOr<std::shared_ptr<Job>> Get(const std::string& id) const;
  // Forgets a job (e.g. one that could not be queued); false when unknown.
  bool Remove(const std::string& id);
  // RequestCancel on every job that has not ended (server shutdown).
  void CancelAll();
  std::vector<JobSnapshot> List() const;
  size_t size() const;

 private:
  void DropEndedLocked(absl::Time now);

  const JobRegistryOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Job>> jobs_;
};

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_JOB_REGISTRY_H_
