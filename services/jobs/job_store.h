// The durable job store: every job's row (spec, state, attempts, lease,
// progress, result) and its numbered events. One implementation (SqlJobStore)
// over SqlDatabase, so SQLite and PostgreSQL behave the same; the scheduler is
// the only writer. All times are Unix milliseconds passed in by the caller
// (tests control the clock).
//
// Queue discipline: ClaimNext takes the QUEUED job of highest priority, then
// oldest, that the worker can run, atomically (two scheduler replicas never
// claim one job). A RUNNING job holds a lease its scheduler renews; a job whose
// lease ran out (its scheduler or worker died) is re-queued by
// RecoverExpired, up to max_attempts, then FAILED with the reason.
#ifndef TESSERA_SERVICES_JOBS_JOB_STORE_H_
#define TESSERA_SERVICES_JOBS_JOB_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/jobs/job_types.h"
#include "services/jobs/sql_database.h"

namespace tessera::jobs {

struct JobRecord {
  std::string job_id;
  std::string request_id;             // client's idempotency key; may be empty
  std::string kind;
  JobState state = JobState::kQueued;
  int priority = 0;
  std::string spec;                   // serialized tessera.v1.JobSpec
  bool needs_gpu = false;
  int64_t need_device_bytes = 0;
  int64_t created_ms = 0, updated_ms = 0, started_ms = 0, finished_ms = 0;
  int64_t deadline_ms = 0;            // 0: none
  int attempts = 0;                   // attempts claimed so far
  int max_attempts = 3;
  std::string worker;                 // of the last attempt
  int64_t lease_expires_ms = 0;       // while RUNNING
  bool cancel_requested = false;
  int error_code = 0;                 // absl::StatusCode when FAILED/CANCELLED
  std::string error_message;
  std::string last_progress;          // serialized tessera.v1.Progress
  int64_t last_sequence = 0;
  std::string result;                 // serialized tessera.v1.JobResult when SUCCEEDED
  int64_t peak_device_bytes = 0;
  // Who submitted it (the authenticated principal; "" without
  // authentication) and the fingerprint gallery it touches ("" for none):
  // who may see it (job_access.h).
  std::string owner;
  std::string gallery;
  // When its results were deleted (0: not) and why ("retention 7d",
  // "deleted by ada"): the row stays as the tombstone.
  int64_t deleted_ms = 0;
  std::string deleted_reason;
  int64_t result_bytes = 0;  // its result files' bytes while they exist
  // The W3C trace id of the call that submitted it ("" before issue 35): its events carry it
  // and the worker running it makes it current (common/trace_context.h).
  std::string trace_id;
};

// How many QUEUED jobs a store takes (issue 31: the whole queue, and one
// principal's share of it, so one client cannot fill it).
struct QueueLimits {
  int64_t max_queued = -1;            // < 0: no limit
  int64_t max_queued_per_owner = -1;  // < 0: no limit
};

struct StoredEvent {
  std::string job_id;
  int64_t sequence = 0;
  int64_t unix_ms = 0;
  JobState state = JobState::kQueued;
  std::string progress;               // serialized tessera.v1.Progress (may be empty)
  std::string message;
};

struct JobFilter {
  std::vector<JobState> states;       // empty: any
  std::string kind;                   // empty: any
  std::optional<std::string> owner;   // only this principal's jobs
  std::optional<std::string> gallery; // only this gallery's jobs
  int limit = 100;
  // Paging: jobs created before this (created_ms, job_id); 0/"" = newest.
  int64_t before_created_ms = 0;
  std::string before_job_id;
};

struct ClaimRequest {
  std::string worker;
  std::vector<std::string> kinds;     // engines the worker runs
  bool has_gpu = false;
  int64_t free_device_bytes = 0;      // jobs needing more are left for others
  int64_t now_ms = 0;
  int64_t lease_ms = 10000;
};

// How an attempt ended.
struct AttemptOutcome {
  JobState state = JobState::kSucceeded;  // SUCCEEDED, FAILED or CANCELLED
  int error_code = 0;
  std::string error_message;
  std::string result;                 // serialized tessera.v1.JobResult
  int64_t peak_device_bytes = 0;
  int64_t result_bytes = 0;           // the result files' bytes (--results-max-bytes)
};

class JobStore {
 public:
  // Creates the tables when absent (schema version checked).
  static absl::StatusOr<std::unique_ptr<JobStore>> Open(std::unique_ptr<SqlDatabase> db);
  explicit JobStore(std::unique_ptr<SqlDatabase> db) : db_(std::move(db)) {}

  // Inserts `job` as QUEUED with event 1 ("queued"). When job.request_id is
  // already known, returns that job instead (*created = false). When the
  // queue already holds limits.max_queued jobs, or limits.max_queued_per_owner
  // of job.owner's (a non-empty owner), RESOURCE_EXHAUSTED naming the limit
  // (nothing written); a negative limit is none.
  absl::StatusOr<JobRecord> Create(const JobRecord& job, const QueueLimits& limits, bool* created);
  absl::StatusOr<JobRecord> Get(const std::string& job_id);
  // The job submitted with this (non-empty) request_id; NOT_FOUND when none.
  absl::StatusOr<JobRecord> FindByRequestId(const std::string& request_id);
  absl::StatusOr<std::vector<JobRecord>> List(const JobFilter& filter);
  absl::StatusOr<std::map<JobState, int64_t>> CountByState();
  // QUEUED jobs, of `owner` when given.
  absl::StatusOr<int64_t> CountQueued(const std::optional<std::string>& owner = std::nullopt);

  // The next job this worker may run, now RUNNING with attempts + 1, the
  // worker's name and a lease; nullopt when none.
  absl::StatusOr<std::optional<JobRecord>> ClaimNext(const ClaimRequest& request);
  // Extends the lease of the job's current attempt; returns whether
  // cancellation was requested. FAILED_PRECONDITION when the attempt no longer
  // owns the job (it was re-queued or ended meanwhile).
  absl::StatusOr<bool> RenewLease(const std::string& job_id, int attempt, int64_t lease_expires_ms);
  // A progress event of the running attempt; FAILED_PRECONDITION as above.
  absl::Status AppendProgress(const std::string& job_id, int attempt, const std::string& progress, int64_t now_ms);
  // Ends the attempt (and the job); FAILED_PRECONDITION as above.
  absl::Status Finish(const std::string& job_id, int attempt, const AttemptOutcome& outcome, int64_t now_ms);
  // The attempt's worker was lost: QUEUED again while attempts < max_attempts
  // (or FAILED UNAVAILABLE with `reason` when none are left, or CANCELLED when
  // cancellation was requested).
  absl::Status Requeue(const std::string& job_id, int attempt, const std::string& reason, int64_t now_ms);
  // Queued: CANCELLED at once. Running: cancel_requested set (an event says
  // so); the attempt ends it. Ended: unchanged. Returns the row after.
  absl::StatusOr<JobRecord> RequestCancel(const std::string& job_id, int64_t now_ms);
  // An ended job's result is erased and the row marked (deleted_ms, reason;
  // an event says so); again: unchanged. FAILED_PRECONDITION while it is
  // queued or running. The result files are the caller's to remove first.
  absl::StatusOr<JobRecord> MarkResultsDeleted(const std::string& job_id, const std::string& reason, int64_t now_ms);
  // Up to `limit` ended jobs whose results are not deleted, finished before
  // `finished_before_ms`, oldest first (retention).
  absl::StatusOr<std::vector<JobRecord>> EndedBefore(int64_t finished_before_ms, int limit);
  // The bytes of every result not deleted (JobRecord::result_bytes summed).
  absl::StatusOr<int64_t> ResultBytesHeld();
  // Running jobs whose lease expired are re-queued as by Requeue; queued jobs
  // past their deadline FAIL with DEADLINE_EXCEEDED. Returns the ids changed.
  absl::StatusOr<std::vector<std::string>> RecoverExpired(int64_t now_ms);
  // Events after `after_sequence`, oldest first, at most `limit`.
  absl::StatusOr<std::vector<StoredEvent>> Events(const std::string& job_id, int64_t after_sequence, int limit = 1000);

  SqlDatabase& db() { return *db_; }

 private:
  std::unique_ptr<SqlDatabase> db_;
};

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_JOB_STORE_H_
