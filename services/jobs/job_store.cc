#include "services/jobs/job_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"

namespace tessera::jobs {
namespace {

// 2: owner, gallery and the results' tombstone (issue 31); a version-1
// database gains the columns, empty (jobs from before ownership: no owner,
// visible to admins only once authentication is on).
// 3: trace_id, the W3C trace of the submitting call (issue 35); older databases
// gain the column, empty (their jobs have no trace).
constexpr int64_t kSchemaVersion = 3;

// The columns every SELECT of a job reads, in RowToRecord's order.
constexpr char kJobColumns[] =
    "job_id, request_id, kind, state, priority, spec, needs_gpu, need_device_bytes, created_ms, updated_ms, "
    "started_ms, finished_ms, deadline_ms, attempts, max_attempts, worker, lease_expires_ms, cancel_requested, "
    "error_code, error_message, last_progress, last_sequence, result, peak_device_bytes, owner, gallery, deleted_ms, "
    "deleted_reason, result_bytes, trace_id";

JobRecord RowToRecord(const SqlRow& r) {
  JobRecord j;
  j.job_id = r.Text(0);
  j.request_id = r.Text(1);
  j.kind = r.Text(2);
  j.state = static_cast<JobState>(r.Int(3));
  j.priority = static_cast<int>(r.Int(4));
  j.spec = r.Blob(5);
  j.needs_gpu = r.Int(6) != 0;
  j.need_device_bytes = r.Int(7);
  j.created_ms = r.Int(8);
  j.updated_ms = r.Int(9);
  j.started_ms = r.Int(10);
  j.finished_ms = r.Int(11);
  j.deadline_ms = r.Int(12);
  j.attempts = static_cast<int>(r.Int(13));
  j.max_attempts = static_cast<int>(r.Int(14));
  j.worker = r.Text(15);
  j.lease_expires_ms = r.Int(16);
  j.cancel_requested = r.Int(17) != 0;
  j.error_code = static_cast<int>(r.Int(18));
  j.error_message = r.Text(19);
  j.last_progress = r.Blob(20);
  j.last_sequence = r.Int(21);
  j.result = r.Blob(22);
  j.peak_device_bytes = r.Int(23);
  j.owner = r.Text(24);
  j.gallery = r.Text(25);
  j.deleted_ms = r.Int(26);
  j.deleted_reason = r.Text(27);
  j.result_bytes = r.Int(28);
  j.trace_id = r.Text(29);
  return j;
}

int64_t S(JobState s) { return static_cast<int64_t>(s); }

}  // namespace

absl::StatusOr<std::unique_ptr<JobStore>> JobStore::Open(std::unique_ptr<SqlDatabase> db) {
  const std::string blob = db->dialect().blob_type;
  const std::vector<std::string> schema = {
      "CREATE TABLE IF NOT EXISTS tessera_schema (version BIGINT NOT NULL)",
      absl::StrCat("CREATE TABLE IF NOT EXISTS tessera_jobs ("
                   "job_id TEXT PRIMARY KEY, request_id TEXT NOT NULL, kind TEXT NOT NULL, "
                   "state BIGINT NOT NULL, priority BIGINT NOT NULL, spec ", blob, ", "
                   "needs_gpu BIGINT NOT NULL, need_device_bytes BIGINT NOT NULL, "
                   "created_ms BIGINT NOT NULL, updated_ms BIGINT NOT NULL, started_ms BIGINT NOT NULL, "
                   "finished_ms BIGINT NOT NULL, deadline_ms BIGINT NOT NULL, attempts BIGINT NOT NULL, "
                   "max_attempts BIGINT NOT NULL, worker TEXT NOT NULL, lease_expires_ms BIGINT NOT NULL, "
                   "cancel_requested BIGINT NOT NULL, error_code BIGINT NOT NULL, error_message TEXT NOT NULL, "
                   "last_progress ", blob, ", last_sequence BIGINT NOT NULL, result ", blob, ", "
                   "peak_device_bytes BIGINT NOT NULL, owner TEXT NOT NULL DEFAULT '', "
                   "gallery TEXT NOT NULL DEFAULT '', deleted_ms BIGINT NOT NULL DEFAULT 0, "
                   "deleted_reason TEXT NOT NULL DEFAULT '', result_bytes BIGINT NOT NULL DEFAULT 0, "
                   "trace_id TEXT NOT NULL DEFAULT '')"),
      // Idempotent submits: one job per client request id.
      "CREATE UNIQUE INDEX IF NOT EXISTS tessera_jobs_request ON tessera_jobs (request_id) WHERE request_id <> ''",
      "CREATE INDEX IF NOT EXISTS tessera_jobs_queue ON tessera_jobs (state, priority, created_ms)",
      "CREATE INDEX IF NOT EXISTS tessera_jobs_created ON tessera_jobs (created_ms, job_id)",
      absl::StrCat("CREATE TABLE IF NOT EXISTS tessera_job_events ("
                   "job_id TEXT NOT NULL, sequence BIGINT NOT NULL, unix_ms BIGINT NOT NULL, state BIGINT NOT NULL, "
                   "progress ", blob, ", message TEXT NOT NULL, PRIMARY KEY (job_id, sequence))"),
  };
  absl::Status status = db->Transaction([&]() -> absl::Status {
    for (const std::string& sql : schema) {
      absl::StatusOr<std::vector<SqlRow>> r = db->Query(sql);
      if (!r.ok()) return r.status();
    }
    absl::StatusOr<std::vector<SqlRow>> version = db->Query("SELECT version FROM tessera_schema");
    if (!version.ok()) return version.status();
    if (version->empty()) {
      return db->Query("INSERT INTO tessera_schema (version) VALUES (?)", {kSchemaVersion}).status();
    }
    const int64_t found = (*version)[0].Int(0);
    if (found == 1 || found == 2) {
      if (found == 1) {  // before owner and gallery
        for (const char* sql : {"ALTER TABLE tessera_jobs ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
                                "ALTER TABLE tessera_jobs ADD COLUMN gallery TEXT NOT NULL DEFAULT ''",
                                "ALTER TABLE tessera_jobs ADD COLUMN deleted_ms BIGINT NOT NULL DEFAULT 0",
                                "ALTER TABLE tessera_jobs ADD COLUMN deleted_reason TEXT NOT NULL DEFAULT ''",
                                "ALTER TABLE tessera_jobs ADD COLUMN result_bytes BIGINT NOT NULL DEFAULT 0"}) {
          TESSERA_RETURN_IF_ERROR(db->Query(sql).status());
        }
      }
      // Before trace ids (issue 35).
      TESSERA_RETURN_IF_ERROR(db->Query("ALTER TABLE tessera_jobs ADD COLUMN trace_id TEXT NOT NULL DEFAULT ''").status());
      return db->Query("UPDATE tessera_schema SET version = ?", {kSchemaVersion}).status();
    }
    if ((*version)[0].Int(0) != kSchemaVersion) {
      return absl::FailedPreconditionError(absl::StrCat("the job database has schema version ", (*version)[0].Int(0),
                                                        "; this build reads version ", kSchemaVersion));
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return std::make_unique<JobStore>(std::move(db));
}

// ---------------------------------------------------------------- helpers

namespace {

absl::StatusOr<std::optional<JobRecord>> SelectJob(SqlDatabase& db, const std::string& job_id) {
  absl::StatusOr<std::vector<SqlRow>> rows =
      db.Query(absl::StrCat("SELECT ", kJobColumns, " FROM tessera_jobs WHERE job_id = ?"), {job_id});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::optional<JobRecord>();
  return std::optional<JobRecord>(RowToRecord((*rows)[0]));
}

absl::StatusOr<JobRecord> MustSelectJob(SqlDatabase& db, const std::string& job_id) {
  absl::StatusOr<std::optional<JobRecord>> job = SelectJob(db, job_id);
  if (!job.ok()) return job.status();
  if (!job->has_value()) return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  return **std::move(job);
}

// Appends the job's next event; inside a transaction.
absl::Status AppendEvent(SqlDatabase& db, const std::string& job_id, JobState state, const std::string& progress,
                         const std::string& message, int64_t now_ms) {
  absl::StatusOr<std::vector<SqlRow>> r = db.Query(
      "UPDATE tessera_jobs SET last_sequence = last_sequence + 1, updated_ms = ? WHERE job_id = ?", {now_ms, job_id});
  if (!r.ok()) return r.status();
  r = db.Query("SELECT last_sequence FROM tessera_jobs WHERE job_id = ?", {job_id});
  if (!r.ok()) return r.status();
  if (r->empty()) return absl::NotFoundError(absl::StrCat("no job '", job_id, "'"));
  const int64_t sequence = (*r)[0].Int(0);
  return db
      .Query("INSERT INTO tessera_job_events (job_id, sequence, unix_ms, state, progress, message) "
             "VALUES (?, ?, ?, ?, ?, ?)",
             {job_id, sequence, now_ms, S(state), SqlBlob{progress}, message})
      .status();
}

// The current attempt of a running job, or FAILED_PRECONDITION.
absl::StatusOr<JobRecord> OwnedAttempt(SqlDatabase& db, const std::string& job_id, int attempt) {
  absl::StatusOr<JobRecord> job = MustSelectJob(db, job_id);
  if (!job.ok()) return job.status();
  if (job->state != JobState::kRunning || job->attempts != attempt) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' attempt ", attempt,
                                                      " no longer owns the job (it is ", JobStateName(job->state),
                                                      ", attempt ", job->attempts, ")"));
  }
  return job;
}

absl::Status EndJob(SqlDatabase& db, const JobRecord& job, JobState state, int code, const std::string& message,
                    const std::string& result, int64_t peak, const std::string& event_message, int64_t now_ms,
                    int64_t result_bytes = 0) {
  // Conditional on the row being as read: under PostgreSQL's READ COMMITTED
  // another replica may have changed it since; then the transaction retries.
  absl::StatusOr<std::vector<SqlRow>> r =
      db.Query("UPDATE tessera_jobs SET state = ?, error_code = ?, error_message = ?, result = ?, finished_ms = ?, "
               "lease_expires_ms = 0, peak_device_bytes = ?, result_bytes = ? WHERE job_id = ? AND state = ? AND "
               "attempts = ?",
               {S(state), int64_t{code}, message, SqlBlob{result}, now_ms, peak, result_bytes, job.job_id,
                S(job.state), int64_t{job.attempts}});
  if (!r.ok()) return r.status();
  if (db.changes() != 1) return absl::AbortedError(absl::StrCat("job '", job.job_id, "' changed meanwhile"));
  return AppendEvent(db, job.job_id, state, job.last_progress, event_message, now_ms);
}

// Requeue's body; inside a transaction.
absl::Status RequeueLocked(SqlDatabase& db, const JobRecord& job, const std::string& reason, int64_t now_ms) {
  if (job.cancel_requested) {
    return EndJob(db, job, JobState::kCancelled, static_cast<int>(absl::StatusCode::kCancelled),
                  absl::StrCat("cancelled (", reason, ")"), "", 0, "cancelled", now_ms);
  }
  if (job.attempts >= job.max_attempts) {
    const std::string message = absl::StrCat(reason, "; gave up after ", job.attempts, " attempt",
                                             job.attempts == 1 ? "" : "s");
    return EndJob(db, job, JobState::kFailed, static_cast<int>(absl::StatusCode::kUnavailable), message, "", 0,
                  absl::StrCat("failed: ", message), now_ms);
  }
  absl::StatusOr<std::vector<SqlRow>> r =
      db.Query("UPDATE tessera_jobs SET state = ?, lease_expires_ms = 0 WHERE job_id = ? AND state = ? AND attempts = ?",
               {S(JobState::kQueued), job.job_id, S(job.state), int64_t{job.attempts}});
  if (!r.ok()) return r.status();
  if (db.changes() != 1) return absl::AbortedError(absl::StrCat("job '", job.job_id, "' changed meanwhile"));
  return AppendEvent(db, job.job_id, JobState::kQueued, job.last_progress,
                     absl::StrCat(reason, "; re-queued (attempt ", job.attempts, " of ", job.max_attempts, " ended)"),
                     now_ms);
}

}  // namespace

// ---------------------------------------------------------------- API

absl::StatusOr<JobRecord> JobStore::Create(const JobRecord& job, const QueueLimits& limits, bool* created) {
  *created = false;
  JobRecord out;
  absl::Status status = db_->Transaction([&]() -> absl::Status {
    *created = false;
    if (!job.request_id.empty()) {
      absl::StatusOr<std::vector<SqlRow>> rows = db_->Query(
          absl::StrCat("SELECT ", kJobColumns, " FROM tessera_jobs WHERE request_id = ?"), {job.request_id});
      if (!rows.ok()) return rows.status();
      if (!rows->empty()) {
        out = RowToRecord((*rows)[0]);
        return absl::OkStatus();
      }
    }
    absl::StatusOr<std::optional<JobRecord>> same_id = SelectJob(*db_, job.job_id);
    if (!same_id.ok()) return same_id.status();
    if (same_id->has_value()) return absl::AlreadyExistsError(absl::StrCat("job '", job.job_id, "' exists"));
    if (limits.max_queued >= 0) {
      absl::StatusOr<int64_t> queued = CountQueued();  // inside this transaction
      if (!queued.ok()) return queued.status();
      if (*queued >= limits.max_queued) {
        return absl::ResourceExhaustedError(
            absl::StrCat("the job queue is full (", limits.max_queued, " jobs queued: --max-queued)"));
      }
    }
    if (limits.max_queued_per_owner >= 0 && !job.owner.empty()) {
      absl::StatusOr<int64_t> mine = CountQueued(job.owner);
      if (!mine.ok()) return mine.status();
      if (*mine >= limits.max_queued_per_owner) {
        return absl::ResourceExhaustedError(absl::StrCat("principal '", job.owner, "' has ", *mine,
                                                         " jobs queued, its limit (--max-queued-per-principal)"));
      }
    }
    absl::StatusOr<std::vector<SqlRow>> r = db_->Query(
        absl::StrCat("INSERT INTO tessera_jobs (", kJobColumns,
                     ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"),
        {job.job_id, job.request_id, job.kind, S(JobState::kQueued), int64_t{job.priority}, SqlBlob{job.spec},
         int64_t{job.needs_gpu ? 1 : 0}, job.need_device_bytes, job.created_ms, job.created_ms, int64_t{0}, int64_t{0},
         job.deadline_ms, int64_t{0}, int64_t{job.max_attempts}, std::string(), int64_t{0}, int64_t{0}, int64_t{0},
         std::string(), SqlBlob{""}, int64_t{0}, SqlBlob{""}, int64_t{0}, job.owner, job.gallery, int64_t{0},
         std::string(), int64_t{0}, job.trace_id});
    if (!r.ok()) return r.status();
    TESSERA_RETURN_IF_ERROR(AppendEvent(*db_, job.job_id, JobState::kQueued, "", "queued", job.created_ms));
    absl::StatusOr<JobRecord> inserted = MustSelectJob(*db_, job.job_id);
    if (!inserted.ok()) return inserted.status();
    out = *std::move(inserted);
    *created = true;
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<JobRecord> JobStore::Get(const std::string& job_id) { return MustSelectJob(*db_, job_id); }

absl::StatusOr<JobRecord> JobStore::FindByRequestId(const std::string& request_id) {
  if (request_id.empty()) return absl::InvalidArgumentError("request_id is empty");
  absl::StatusOr<std::vector<SqlRow>> rows = db_->Query(
      absl::StrCat("SELECT ", kJobColumns, " FROM tessera_jobs WHERE request_id = ?"), {request_id});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return absl::NotFoundError(absl::StrCat("no job with request_id '", request_id, "'"));
  return RowToRecord((*rows)[0]);
}

absl::StatusOr<std::vector<JobRecord>> JobStore::List(const JobFilter& filter) {
  std::string sql = absl::StrCat("SELECT ", kJobColumns, " FROM tessera_jobs WHERE 1 = 1");
  std::vector<SqlValue> params;
  if (!filter.states.empty()) {
    std::vector<std::string> marks;
    for (JobState s : filter.states) {
      marks.push_back("?");
      params.push_back(S(s));
    }
    absl::StrAppend(&sql, " AND state IN (", absl::StrJoin(marks, ", "), ")");
  }
  if (!filter.kind.empty()) {
    absl::StrAppend(&sql, " AND kind = ?");
    params.push_back(filter.kind);
  }
  if (filter.owner.has_value()) {
    absl::StrAppend(&sql, " AND owner = ?");
    params.push_back(*filter.owner);
  }
  if (filter.gallery.has_value()) {
    absl::StrAppend(&sql, " AND gallery = ?");
    params.push_back(*filter.gallery);
  }
  if (filter.before_created_ms > 0) {
    absl::StrAppend(&sql, " AND (created_ms < ? OR (created_ms = ? AND job_id < ?))");
    params.push_back(filter.before_created_ms);
    params.push_back(filter.before_created_ms);
    params.push_back(filter.before_job_id);
  }
  absl::StrAppend(&sql, " ORDER BY created_ms DESC, job_id DESC LIMIT ?");
  params.push_back(int64_t{filter.limit});
  absl::StatusOr<std::vector<SqlRow>> rows = db_->Query(sql, params);
  if (!rows.ok()) return rows.status();
  std::vector<JobRecord> out;
  for (const SqlRow& row : *rows) out.push_back(RowToRecord(row));
  return out;
}

absl::StatusOr<std::map<JobState, int64_t>> JobStore::CountByState() {
  absl::StatusOr<std::vector<SqlRow>> rows = db_->Query("SELECT state, COUNT(*) FROM tessera_jobs GROUP BY state");
  if (!rows.ok()) return rows.status();
  std::map<JobState, int64_t> out;
  for (const SqlRow& row : *rows) out[static_cast<JobState>(row.Int(0))] = row.Int(1);
  return out;
}

absl::StatusOr<int64_t> JobStore::CountQueued(const std::optional<std::string>& owner) {
  absl::StatusOr<std::vector<SqlRow>> rows =
      owner.has_value() ? db_->Query("SELECT COUNT(*) FROM tessera_jobs WHERE state = ? AND owner = ?",
                                     {S(JobState::kQueued), *owner})
                        : db_->Query("SELECT COUNT(*) FROM tessera_jobs WHERE state = ?", {S(JobState::kQueued)});
  if (!rows.ok()) return rows.status();
  return (*rows)[0].Int(0);
}

absl::StatusOr<std::optional<JobRecord>> JobStore::ClaimNext(const ClaimRequest& request) {
  if (request.kinds.empty()) return std::optional<JobRecord>();
  std::optional<JobRecord> out;
  absl::Status status = db_->Transaction([&]() -> absl::Status {
    out.reset();
    std::vector<std::string> marks;
    std::vector<SqlValue> params = {S(JobState::kQueued)};
    for (const std::string& kind : request.kinds) {
      marks.push_back("?");
      params.push_back(kind);
    }
    params.push_back(int64_t{request.has_gpu ? 1 : 0});
    params.push_back(request.free_device_bytes);
    params.push_back(request.now_ms);
    absl::StatusOr<std::vector<SqlRow>> rows = db_->Query(
        absl::StrCat("SELECT job_id FROM tessera_jobs WHERE state = ? AND kind IN (", absl::StrJoin(marks, ", "),
                     ") AND needs_gpu <= ? AND need_device_bytes <= ? AND (deadline_ms = 0 OR deadline_ms > ?) "
                     "ORDER BY priority DESC, created_ms ASC, job_id ASC LIMIT 1",
                     db_->dialect().lock_for_claim),
        params);
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return absl::OkStatus();
    const std::string job_id = (*rows)[0].Text(0);
    absl::StatusOr<std::vector<SqlRow>> r = db_->Query(
        "UPDATE tessera_jobs SET state = ?, attempts = attempts + 1, worker = ?, started_ms = ?, "
        "lease_expires_ms = ? WHERE job_id = ? AND state = ?",
        {S(JobState::kRunning), request.worker, request.now_ms, request.now_ms + request.lease_ms, job_id,
         S(JobState::kQueued)});
    if (!r.ok()) return r.status();
    if (db_->changes() != 1) return absl::AbortedError("claimed by another scheduler");
    absl::StatusOr<JobRecord> job = MustSelectJob(*db_, job_id);
    if (!job.ok()) return job.status();
    TESSERA_RETURN_IF_ERROR(AppendEvent(
        *db_, job_id, JobState::kRunning, job->last_progress,
        absl::StrCat("started on worker ", request.worker, " (attempt ", job->attempts, " of ", job->max_attempts, ")"),
        request.now_ms));
    job->last_sequence += 1;
    out = *std::move(job);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<bool> JobStore::RenewLease(const std::string& job_id, int attempt, int64_t lease_expires_ms) {
  bool cancel = false;
  absl::Status status = db_->Transaction([&]() -> absl::Status {
    absl::StatusOr<JobRecord> job = OwnedAttempt(*db_, job_id, attempt);
    if (!job.ok()) return job.status();
    cancel = job->cancel_requested;
    TESSERA_RETURN_IF_ERROR(db_->Query("UPDATE tessera_jobs SET lease_expires_ms = ? WHERE job_id = ? AND state = ? "
                                       "AND attempts = ?",
                                       {lease_expires_ms, job_id, S(JobState::kRunning), int64_t{attempt}})
                                .status());
    if (db_->changes() != 1) return absl::AbortedError(absl::StrCat("job '", job_id, "' changed meanwhile"));
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return cancel;
}

absl::Status JobStore::AppendProgress(const std::string& job_id, int attempt, const std::string& progress,
                                      int64_t now_ms) {
  return db_->Transaction([&]() -> absl::Status {
    absl::StatusOr<JobRecord> job = OwnedAttempt(*db_, job_id, attempt);
    if (!job.ok()) return job.status();
    absl::StatusOr<std::vector<SqlRow>> r =
        db_->Query("UPDATE tessera_jobs SET last_progress = ? WHERE job_id = ?", {SqlBlob{progress}, job_id});
    if (!r.ok()) return r.status();
    return AppendEvent(*db_, job_id, JobState::kRunning, progress, "", now_ms);
  });
}

absl::Status JobStore::Finish(const std::string& job_id, int attempt, const AttemptOutcome& outcome, int64_t now_ms) {
  return db_->Transaction([&]() -> absl::Status {
    absl::StatusOr<JobRecord> job = OwnedAttempt(*db_, job_id, attempt);
    if (!job.ok()) return job.status();
    std::string message = outcome.state == JobState::kSucceeded ? "succeeded"
                          : outcome.state == JobState::kCancelled
                              ? absl::StrCat("cancelled: ", outcome.error_message)
                              : absl::StrCat("failed: ", outcome.error_message);
    return EndJob(*db_, *job, outcome.state, outcome.error_code, outcome.error_message, outcome.result,
                  outcome.peak_device_bytes, message, now_ms, outcome.result_bytes);
  });
}

absl::Status JobStore::Requeue(const std::string& job_id, int attempt, const std::string& reason, int64_t now_ms) {
  return db_->Transaction([&]() -> absl::Status {
    absl::StatusOr<JobRecord> job = OwnedAttempt(*db_, job_id, attempt);
    if (!job.ok()) return job.status();
    return RequeueLocked(*db_, *job, reason, now_ms);
  });
}

absl::StatusOr<JobRecord> JobStore::MarkResultsDeleted(const std::string& job_id, const std::string& reason,
                                                       int64_t now_ms) {
  JobRecord out;
  absl::Status status = db_->Transaction([&]() -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(JobRecord job, MustSelectJob(*db_, job_id));
    if (job.state == JobState::kQueued || job.state == JobState::kRunning) {
      return absl::FailedPreconditionError(
          absl::StrCat("job '", job_id, "' is ", JobStateName(job.state), ": cancel it first, then delete it"));
    }
    if (job.deleted_ms == 0) {
      TESSERA_RETURN_IF_ERROR(
          db_->Query("UPDATE tessera_jobs SET result = ?, deleted_ms = ?, deleted_reason = ?, result_bytes = 0 "
                     "WHERE job_id = ?",
                     {SqlBlob{""}, now_ms, reason, job_id})
              .status());
      TESSERA_RETURN_IF_ERROR(AppendEvent(*db_, job_id, job.state, "", absl::StrCat("results deleted: ", reason),
                                          now_ms));
    }
    TESSERA_ASSIGN_OR_RETURN(out, MustSelectJob(*db_, job_id));
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<int64_t> JobStore::ResultBytesHeld() {
  absl::StatusOr<std::vector<SqlRow>> rows =
      db_->Query("SELECT COALESCE(SUM(result_bytes), 0) FROM tessera_jobs WHERE deleted_ms = 0");
  if (!rows.ok()) return rows.status();
  return (*rows)[0].Int(0);
}

absl::StatusOr<std::vector<JobRecord>> JobStore::EndedBefore(int64_t finished_before_ms, int limit) {
  absl::StatusOr<std::vector<SqlRow>> rows = db_->Query(
      absl::StrCat("SELECT ", kJobColumns,
                   " FROM tessera_jobs WHERE state IN (?, ?, ?) AND deleted_ms = 0 AND finished_ms > 0 AND "
                   "finished_ms < ? ORDER BY finished_ms LIMIT ?"),
      {S(JobState::kSucceeded), S(JobState::kFailed), S(JobState::kCancelled), finished_before_ms, int64_t{limit}});
  if (!rows.ok()) return rows.status();
  std::vector<JobRecord> out;
  for (const SqlRow& row : *rows) out.push_back(RowToRecord(row));
  return out;
}

absl::StatusOr<JobRecord> JobStore::RequestCancel(const std::string& job_id, int64_t now_ms) {
  JobRecord out;
  absl::Status status = db_->Transaction([&]() -> absl::Status {
    absl::StatusOr<JobRecord> job = MustSelectJob(*db_, job_id);
    if (!job.ok()) return job.status();
    if (job->state == JobState::kQueued) {
      TESSERA_RETURN_IF_ERROR(EndJob(*db_, *job, JobState::kCancelled,
                                           static_cast<int>(absl::StatusCode::kCancelled), "cancelled while queued",
                                           "", 0, "cancelled while queued", now_ms));
    } else if (job->state == JobState::kRunning && !job->cancel_requested) {
      absl::StatusOr<std::vector<SqlRow>> r =
          db_->Query("UPDATE tessera_jobs SET cancel_requested = 1 WHERE job_id = ?", {job_id});
      if (!r.ok()) return r.status();
      TESSERA_RETURN_IF_ERROR(
          AppendEvent(*db_, job_id, JobState::kRunning, job->last_progress, "cancel requested", now_ms));
    }
    absl::StatusOr<JobRecord> after = MustSelectJob(*db_, job_id);
    if (!after.ok()) return after.status();
    out = *std::move(after);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<std::vector<std::string>> JobStore::RecoverExpired(int64_t now_ms) {
  std::vector<std::string> changed;
  absl::Status status = db_->Transaction([&]() -> absl::Status {
    changed.clear();
    absl::StatusOr<std::vector<SqlRow>> rows =
        db_->Query(absl::StrCat("SELECT ", kJobColumns,
                                " FROM tessera_jobs WHERE (state = ? AND lease_expires_ms < ?) OR "
                                "(state = ? AND deadline_ms > 0 AND deadline_ms <= ?)"),
                   {S(JobState::kRunning), now_ms, S(JobState::kQueued), now_ms});
    if (!rows.ok()) return rows.status();
    for (const SqlRow& row : *rows) {
      const JobRecord job = RowToRecord(row);
      if (job.state == JobState::kRunning) {
        TESSERA_RETURN_IF_ERROR(RequeueLocked(
            *db_, job,
            absl::StrCat("worker ", job.worker, " stopped answering (lease expired; its scheduler or worker died)"),
            now_ms));
      } else {
        TESSERA_RETURN_IF_ERROR(EndJob(*db_, job, JobState::kFailed,
                                             static_cast<int>(absl::StatusCode::kDeadlineExceeded),
                                             "the job's deadline passed while it was queued", "", 0,
                                             "failed: deadline passed while queued", now_ms));
      }
      changed.push_back(job.job_id);
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return changed;
}

absl::StatusOr<std::vector<StoredEvent>> JobStore::Events(const std::string& job_id, int64_t after_sequence,
                                                          int limit) {
  absl::StatusOr<std::vector<SqlRow>> rows =
      db_->Query("SELECT job_id, sequence, unix_ms, state, progress, message FROM tessera_job_events "
                 "WHERE job_id = ? AND sequence > ? ORDER BY sequence ASC LIMIT ?",
                 {job_id, after_sequence, int64_t{limit}});
  if (!rows.ok()) return rows.status();
  std::vector<StoredEvent> out;
  for (const SqlRow& r : *rows) {
    StoredEvent e;
    e.job_id = r.Text(0);
    e.sequence = r.Int(1);
    e.unix_ms = r.Int(2);
    e.state = static_cast<JobState>(r.Int(3));
    e.progress = r.Blob(4);
    e.message = r.Text(5);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace tessera::jobs
