#include "services/scheduler/scheduler.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/durable_file.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/status.h"
#include "common/text_checks.h"
#include "common/trace_context.h"
#include "services/common/random_id.h"
#include "services/jobs/request_fingerprint.h"
#include "services/scheduler/job_info.h"

namespace tessera::scheduler {

namespace fs = std::filesystem;
namespace {

using jobs::JobRecord;
using jobs::JobState;

constexpr int kMaxPriority = 10;
constexpr int kMaxAttempts = 10;

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

// OK when `job` (the one `request_id` names) was submitted with
// `fingerprint` by `owner` ("" without authentication: any); jobs stored
// before fingerprints have none and match. Another owner's job is not named.
absl::Status SameRequest(const JobRecord& job, const std::string& request_id, const std::string& fingerprint,
                         const std::string& id_field, const std::string& owner) {
  if (!owner.empty() && job.owner != owner) {
    return absl::AlreadyExistsError(absl::StrCat(id_field, " ", QuoteBounded(request_id, 64),
                                                 " is taken by another principal's job: pick a new ", id_field));
  }
  v1::JobSpec stored;
  const bool parsed = stored.ParseFromString(job.spec);
  if (parsed && (stored.request_fingerprint().empty() || stored.request_fingerprint() == fingerprint)) {
    return absl::OkStatus();
  }
  return absl::AlreadyExistsError(absl::StrCat(
      id_field, " ", QuoteBounded(request_id, 64), " already names job ", job.job_id, " (", job.kind, ", ",
      jobs::JobStateName(job.state),
      ") submitted with a different request; the same id retries only the same request: pick a new ", id_field));
}

// Prometheus families (get-or-create; process registry).
struct SchedulerMetrics {
  prometheus::Family<prometheus::Gauge>& jobs_by_state =
      GaugeFamily("tessera_scheduler_jobs", "Jobs in the store by state.");
  prometheus::Family<prometheus::Counter>& outcomes =
      CounterFamily("tessera_scheduler_job_outcomes_total", "Job attempts ended, by kind and outcome.");
  prometheus::Family<prometheus::Histogram>& queue_seconds =
      HistogramFamily("tessera_scheduler_queue_seconds", "Time from submit (or re-queue) to start, by kind.");
  prometheus::Family<prometheus::Histogram>& compute_seconds =
      HistogramFamily("tessera_scheduler_compute_seconds", "Time an attempt ran, by kind.");
  prometheus::Family<prometheus::Gauge>& worker_running =
      GaugeFamily("tessera_scheduler_worker_running", "Attempts running on each worker.");
  prometheus::Family<prometheus::Gauge>& worker_healthy =
      GaugeFamily("tessera_scheduler_worker_healthy", "1 when the worker answered its last probe.");
  prometheus::Family<prometheus::Counter>& rejected =
      CounterFamily("tessera_scheduler_rejected_total", "Submits refused because a queue was full.");
};

SchedulerMetrics& Metrics() {
  static SchedulerMetrics* metrics = new SchedulerMetrics();
  return *metrics;
}

}  // namespace

struct Scheduler::Active {
  std::string job_id;
  int attempt = 0;
  std::atomic<bool> cancel{false};
};

struct Scheduler::WorkerState {
  std::shared_ptr<Worker> worker;
  int slots = 1;
  std::mutex mu;
  bool healthy = false;
  v1::WorkerInfo info;     // last good Describe
  std::string last_error;
  std::atomic<int> running{0};
};

Scheduler::Scheduler(SchedulerOptions options, std::unique_ptr<jobs::JobStore> store,
                     const jobs::EngineRegistry* engines, std::vector<WorkerSlots> workers)
    : options_(std::move(options)), store_(std::move(store)), engines_(engines) {
  for (WorkerSlots& w : workers) {
    auto state = std::make_unique<WorkerState>();
    state->worker = std::move(w.worker);
    state->slots = std::max(1, w.slots);
    workers_.push_back(std::move(state));
  }
}

Scheduler::~Scheduler() { Stop(); }

absl::Status Scheduler::Start() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (started_) return absl::FailedPreconditionError("scheduler already started");
    started_ = true;
  }
  // Jobs an earlier incarnation of this scheduler left running on its own
  // in-process workers died with it: re-queue them now rather than after
  // their leases expire.
  jobs::JobFilter running;
  running.states = {JobState::kRunning};
  running.limit = 100000;
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRecord> orphans, store_->List(running));
  for (const JobRecord& job : orphans) {
    const bool ours = std::any_of(workers_.begin(), workers_.end(), [&](const std::unique_ptr<WorkerState>& w) {
      return w->worker->name() == job.worker && absl::StartsWith(job.worker, options_.name + "/");
    });
    if (!ours) continue;
    absl::Status requeued = store_->Requeue(job.job_id, job.attempts,
                                            absl::StrCat("scheduler ", options_.name, " restarted"), NowMs());
    TESSERA_LOG(INFO) << "scheduler: job " << job.job_id << " was running when " << options_.name
                      << " stopped: " << (requeued.ok() ? "re-queued" : requeued.ToString());
  }
  ProbeWorkers();
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::unique_ptr<WorkerState>& w : workers_) {
    for (int i = 0; i < w->slots; ++i) threads_.emplace_back([this, state = w.get()] { DispatchLoop(state); });
  }
  threads_.emplace_back([this] { KeeperLoop(); });
  return absl::OkStatus();
}

void Scheduler::Stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    for (auto& [id, active] : active_) active->cancel.store(true);
    threads.swap(threads_);
    ++version_;
  }
  changed_.notify_all();
  for (std::thread& t : threads) t.join();
}

void Scheduler::Notify() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++version_;
  }
  changed_.notify_all();
}

void Scheduler::WaitForChange(int64_t seen_version, absl::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, absl::ToChronoMilliseconds(timeout),
                    [&] { return stopping_ || version_ != seen_version; });
}

// ---------------------------------------------------------------- submit and queries

absl::StatusOr<v1::JobInfo> Scheduler::Submit(const v1::SubmitJobRequest& request, const SubmitOptions& options) {
  if (!request.has_spec() || request.spec().spec().type_url().empty()) {
    return absl::InvalidArgumentError(
        "spec.spec is empty: pack the engine's request in it (e.g. a tessera.v1.RegisterRequest, "
        "tessera.v1.CreateAtlasRequest or tessera.v1.SearchBatchRequest)");
  }
  if (!request.request_id().empty()) {
    TESSERA_RETURN_IF_ERROR(Annotate(jobs::ValidateJobId(request.request_id()), "request_id"));
  }
  if (request.priority() < -kMaxPriority || request.priority() > kMaxPriority) {
    return absl::InvalidArgumentError(
        absl::StrCat("priority ", request.priority(), " is outside -", kMaxPriority, "..", kMaxPriority));
  }
  if (request.max_attempts() < 0 || request.max_attempts() > kMaxAttempts) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_attempts ", request.max_attempts(), " is outside 0..", kMaxAttempts, " (0: default)"));
  }
  if (request.deadline_unix_ms() < 0) return absl::InvalidArgumentError("deadline_unix_ms must not be negative");
  const std::string fingerprint = options.request_fingerprint.empty()
                                      ? jobs::SpecFingerprint(request.spec().spec())
                                      : options.request_fingerprint;
  if (!request.request_id().empty()) {
    // Decided before any check of the spec: a retry of a submit whose answer
    // was lost gets its job even when the spec would no longer pass (its
    // atlas exists now, its upload expired).
    absl::StatusOr<JobRecord> known =
        FindSameRequest(request.request_id(), fingerprint, options.id_field, options.owner);
    if (known.ok()) return ToJobInfo(*known);
    if (known.status().code() != absl::StatusCode::kNotFound) return known.status();
  }
  // The results held on disk within their budget: expired ones go first.
  if (options_.results_max_bytes > 0) TESSERA_RETURN_IF_ERROR(CheckResultsBudget());
  // Only a new job's deadline must lie ahead: a retry after it passed gets
  // its job above (issue 39).
  const int64_t now = NowMs();
  if (request.deadline_unix_ms() > 0 && request.deadline_unix_ms() <= now) {
    return absl::DeadlineExceededError("the job's deadline has already passed");
  }
  absl::StatusOr<std::shared_ptr<const jobs::Engine>> engine =
      engines_->Find(request.spec().kind(), request.spec().spec());
  jobs::ResourceNeeds needs;
  std::string kind = request.spec().kind();
  if (engine.ok()) {
    TESSERA_RETURN_IF_ERROR((*engine)->Validate(request.spec().spec()));
    needs = (*engine)->Needs(request.spec().spec());
    kind = (*engine)->kind();
    if (options.may_read_job) {
      for (const std::string& id : (*engine)->ReferencedJobs(request.spec().spec())) {
        const absl::Status not_found = absl::NotFoundError(absl::StrCat("the spec names job '", id,
                                                                        "', which does not exist"));
        absl::StatusOr<JobRecord> referenced = store_->Get(id);
        if (!referenced.ok()) {
          return referenced.status().code() == absl::StatusCode::kNotFound ? not_found : referenced.status();
        }
        if (!options.may_read_job(*referenced).ok()) return not_found;
      }
    }
    if (options.require_gpu_worker && needs.needs_gpu && !HasGpuWorker()) {
      return absl::FailedPreconditionError(
          "options.device is \"cuda\" but no worker of this scheduler has a CUDA GPU; use \"auto\" or \"cpu\"");
    }
  } else {
    // A scheduler without the engine (--role scheduler) takes the kinds its
    // workers run and leaves validation to them.
    kind = WorkerKindFor(kind, request.spec().spec().type_url());
    if (kind.empty()) return engine.status();
  }

  JobRecord job;
  job.job_id = RandomId("job-");
  job.request_id = request.request_id();
  job.kind = kind;
  job.priority = request.priority();
  v1::JobSpec spec = request.spec();
  spec.set_kind(kind);
  spec.set_request_fingerprint(fingerprint);
  job.spec = spec.SerializeAsString();
  job.needs_gpu = needs.needs_gpu;
  job.need_device_bytes = needs.device_bytes;
  job.created_ms = now;
  job.deadline_ms = request.deadline_unix_ms();
  job.max_attempts = request.max_attempts() > 0 ? request.max_attempts() : options_.default_max_attempts;
  job.owner = options.owner;
  job.gallery = options.gallery;
  job.trace_id = !options.trace_id.empty() ? options.trace_id : CurrentTraceId();
  bool created = false;
  absl::StatusOr<JobRecord> stored = store_->Create(job, {options_.max_queued, options_.max_queued_per_principal}, &created);
  if (!stored.ok()) {
    if (stored.status().code() == absl::StatusCode::kResourceExhausted) {
      GetCounter(Metrics().rejected, {{"kind", job.kind}}).Increment();
      return absl::ResourceExhaustedError(absl::StrCat(stored.status().message(), "; retry after ",
                                                       absl::ToInt64Milliseconds(options_.retry_after), " ms"));
    }
    return stored.status();
  }
  if (created) {
    TESSERA_LOG(INFO) << "scheduler: job " << stored->job_id << " (" << stored->kind << ", priority "
                      << stored->priority << ") queued";
    // Fault injection for the process test of a lost acknowledgment: the job
    // is committed and the process dies before it answers.
    if (const char* crash = std::getenv("TESSERA_FAULT_EXIT_AFTER_COMMIT");
        crash != nullptr && !job.request_id.empty() && job.request_id == crash) {
      TESSERA_LOG(WARNING) << "scheduler: TESSERA_FAULT_EXIT_AFTER_COMMIT: exiting before answering";
      std::_Exit(86);
    }
    Notify();
  } else {
    // The same request_id committed meanwhile (a concurrent retry): the same
    // rule as above.
    TESSERA_RETURN_IF_ERROR(SameRequest(*stored, request.request_id(), fingerprint, options.id_field, options.owner));
  }
  return ToJobInfo(*stored);
}

absl::StatusOr<JobRecord> Scheduler::FindSameRequest(const std::string& request_id, const std::string& fingerprint,
                                                     const std::string& id_field, const std::string& owner) {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, store_->FindByRequestId(request_id));
  TESSERA_RETURN_IF_ERROR(SameRequest(job, request_id, fingerprint, id_field, owner));
  return job;
}

bool Scheduler::HasGpuWorker() {
  for (const v1::WorkerInfo& worker : Workers()) {
    for (const v1::WorkerDevice& device : worker.devices()) {
      if (device.name() != "cpu") return true;
    }
  }
  return false;
}

std::string Scheduler::WorkerKindFor(const std::string& kind, const std::string& type_url) {
  const std::string type = jobs::SpecTypeName(type_url);
  for (const std::unique_ptr<WorkerState>& w : workers_) {
    std::lock_guard<std::mutex> lock(w->mu);
    for (int i = 0; i < w->info.kinds_size(); ++i) {
      const bool type_matches = i < w->info.spec_types_size() && w->info.spec_types(i) == type;
      if (kind.empty() ? type_matches : w->info.kinds(i) == kind) return w->info.kinds(i);
    }
  }
  return "";
}

absl::StatusOr<v1::JobInfo> Scheduler::Get(const std::string& job_id) {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, store_->Get(job_id));
  return ToJobInfo(job);
}

absl::StatusOr<v1::JobInfo> Scheduler::Cancel(const std::string& job_id) {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, store_->RequestCancel(job_id, NowMs()));
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = active_.find(job_id);
    if (it != active_.end()) it->second->cancel.store(true);
  }
  TESSERA_LOG(INFO) << "scheduler: cancel requested for job " << job_id << " (" << JobStateName(job.state) << ")";
  Notify();
  return ToJobInfo(job);
}

absl::StatusOr<v1::JobResult> Scheduler::GetResult(const std::string& job_id) {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, store_->Get(job_id));
  if (job.deleted_ms > 0) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "': its results were deleted at ",
                                                      absl::FormatTime(absl::FromUnixMillis(job.deleted_ms)), " (",
                                                      job.deleted_reason, ")"));
  }
  switch (job.state) {
    case JobState::kQueued:
    case JobState::kRunning:
      return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' is ", JobStateName(job.state),
                                                        "; its result is ready once it has SUCCEEDED (Watch)"));
    case JobState::kCancelled:
      return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' was cancelled; it has no result"));
    case JobState::kFailed:
      return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' failed (", job.error_message,
                                                        "); it has no result"));
    case JobState::kSucceeded:
      break;
  }
  v1::JobResult result;
  if (!result.ParseFromString(job.result)) {
    return absl::DataLossError(absl::StrCat("job '", job_id, "': its stored result does not parse"));
  }
  return result;
}

absl::StatusOr<v1::ListJobsResponse> Scheduler::List(const v1::ListJobsRequest& request,
                                                     const std::function<absl::Status(jobs::JobFilter*)>& restrict) {
  jobs::JobFilter filter;
  for (int s : request.states()) {
    if (s < 1 || s > 5) return absl::InvalidArgumentError(absl::StrCat("states: ", s, " is not a job state"));
    filter.states.push_back(static_cast<JobState>(s));
  }
  filter.kind = request.kind();
  if (!request.owner().empty()) filter.owner = request.owner();
  if (!request.gallery_filter().empty()) filter.gallery = request.gallery_filter();
  if (restrict) TESSERA_RETURN_IF_ERROR(restrict(&filter));
  if (request.page_size() < 0 || request.page_size() > 1000) {
    return absl::InvalidArgumentError("page_size must be in 0..1000 (0: 100)");
  }
  filter.limit = request.page_size() > 0 ? request.page_size() : 100;
  if (!request.page_token().empty()) {
    // "<created_ms>/<job_id>" of the last job of the previous page.
    const size_t slash = request.page_token().find('/');
    if (slash == std::string::npos ||
        !absl::SimpleAtoi(request.page_token().substr(0, slash), &filter.before_created_ms)) {
      return absl::InvalidArgumentError("page_token is not one this server gave out");
    }
    filter.before_job_id = request.page_token().substr(slash + 1);
  }
  ++filter.limit;  // one more tells whether there is a next page
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRecord> rows, store_->List(filter));
  v1::ListJobsResponse out;
  const bool more = static_cast<int>(rows.size()) == filter.limit;
  if (more) rows.pop_back();
  for (const JobRecord& row : rows) *out.add_jobs() = ToJobInfo(row);
  if (more && !rows.empty()) {
    out.set_next_page_token(absl::StrCat(rows.back().created_ms, "/", rows.back().job_id));
  }
  return out;
}

std::vector<v1::WorkerInfo> Scheduler::Workers() {
  std::vector<v1::WorkerInfo> out;
  for (const std::unique_ptr<WorkerState>& w : workers_) {
    std::lock_guard<std::mutex> lock(w->mu);
    v1::WorkerInfo info = w->info;
    info.set_name(w->worker->name());
    info.set_healthy(w->healthy);
    info.set_last_error(w->last_error);
    info.set_slots(w->slots);
    info.set_running(w->running.load());
    out.push_back(std::move(info));
  }
  return out;
}

absl::Status Scheduler::Watch(const std::string& job_id, int64_t after_sequence,
                              const std::function<bool(const v1::JobEvent&)>& send,
                              const std::function<bool()>& stopped) {
  TESSERA_ASSIGN_OR_RETURN(const JobRecord job, store_->Get(job_id));
  int64_t after = std::max<int64_t>(0, after_sequence);
  while (true) {
    int64_t seen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      seen = version_;
    }
    TESSERA_ASSIGN_OR_RETURN(std::vector<jobs::StoredEvent> events, store_->Events(job_id, after));
    for (const jobs::StoredEvent& e : events) {
      if (!send(ToJobEvent(e, job.trace_id))) return absl::UnavailableError("the watcher stopped receiving");
      after = e.sequence;
      if (jobs::IsTerminal(e.state)) return absl::OkStatus();
    }
    if (stopped && stopped()) return absl::CancelledError("watch cancelled");
    if (events.empty()) {
      // Woken by this process's changes at once; other replicas' within the poll.
      WaitForChange(seen, options_.idle_poll);
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return absl::UnavailableError("the scheduler is shutting down");
    }
  }
}

// ---------------------------------------------------------------- dispatch

void Scheduler::DispatchLoop(WorkerState* w) {
  while (true) {
    int64_t seen;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
      seen = version_;
    }
    jobs::ClaimRequest claim;
    {
      std::lock_guard<std::mutex> lock(w->mu);
      if (!w->healthy) {
        claim.kinds.clear();
      } else {
        claim.kinds.assign(w->info.kinds().begin(), w->info.kinds().end());
        int64_t free = 0;
        for (const v1::WorkerDevice& d : w->info.devices()) {
          if (d.name() != "cpu") {
            claim.has_gpu = true;
            free = std::max(free, d.free_bytes());
          }
        }
        // Device-memory estimates only matter where there is a device.
        claim.free_device_bytes = claim.has_gpu ? free : std::numeric_limits<int64_t>::max();
      }
    }
    if (claim.kinds.empty()) {
      WaitForChange(seen, options_.idle_poll);
      continue;
    }
    claim.worker = w->worker->name();
    claim.now_ms = NowMs();
    claim.lease_ms = absl::ToInt64Milliseconds(options_.lease);
    absl::StatusOr<std::optional<JobRecord>> job = store_->ClaimNext(claim);
    if (!job.ok()) {
      TESSERA_LOG(WARNING) << "scheduler: claiming a job for " << claim.worker << " failed: " << job.status();
      WaitForChange(seen, options_.idle_poll);
      continue;
    }
    if (!job->has_value()) {
      WaitForChange(seen, options_.idle_poll);
      continue;
    }
    RunAttempt(w, **job);
  }
}

void Scheduler::RunAttempt(WorkerState* w, const JobRecord& job) {
  auto active = std::make_shared<Active>();
  active->job_id = job.job_id;
  active->attempt = job.attempts;
  active->cancel.store(job.cancel_requested);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) active->cancel.store(true);
    active_[job.job_id] = active;
  }
  Notify();
  const std::string& kind = job.kind;
  GetHistogram(Metrics().queue_seconds, {{"kind", kind}}, LatencyBucketsSeconds())
      .Observe(std::max<int64_t>(0, job.started_ms - job.created_ms) / 1000.0);
  w->running.fetch_add(1);
  GetGauge(Metrics().worker_running, {{"worker", w->worker->name()}}).Increment();

  AttemptCall call;
  call.job_id = job.job_id;
  call.attempt = job.attempts;
  call.cancel = &active->cancel;
  if (job.deadline_ms > 0) call.deadline = absl::FromUnixMillis(job.deadline_ms);
  AttemptResult result;
  if (!call.spec.ParseFromString(job.spec)) {
    result.status = absl::DataLossError("the stored job spec does not parse");
  } else {
    // Progress goes to the store at most every progress_interval (the last
    // one of a burst is kept and written with the next).
    std::mutex progress_mu;
    absl::Time last_write = absl::InfinitePast();
    call.on_progress = [&](const jobs::JobProgress& p) {
      std::lock_guard<std::mutex> lock(progress_mu);
      const absl::Time now = absl::Now();
      if (now - last_write < options_.progress_interval && p.fraction < 1) return;
      last_write = now;
      const std::string bytes = ToProgress(job.job_id, JobState::kRunning, p).SerializeAsString();
      absl::Status s = store_->AppendProgress(job.job_id, job.attempts, bytes, absl::ToUnixMillis(now));
      if (!s.ok() && s.code() == absl::StatusCode::kFailedPrecondition) active->cancel.store(true);
      Notify();
    };
    const absl::Time started = absl::Now();
    // The job's trace (its submitter's) while it runs: an in-process engine's log lines carry it,
    // and a remote worker's Execute call sends it as traceparent (CreatePeerChannel).
    ScopedTraceContext trace(ContinueTrace(job.trace_id));
    result = w->worker->Execute(call);
    GetHistogram(Metrics().compute_seconds, {{"kind", kind}}, LatencyBucketsSeconds())
        .Observe(absl::ToDoubleSeconds(absl::Now() - started));
  }
  w->running.fetch_sub(1);
  GetGauge(Metrics().worker_running, {{"worker", w->worker->name()}}).Decrement();
  bool stopping;
  {
    std::lock_guard<std::mutex> lock(mu_);
    active_.erase(job.job_id);
    stopping = stopping_;
  }

  const int64_t now = NowMs();
  absl::Status recorded;
  std::string outcome;
  if (result.worker_lost) {
    // No more jobs for it until a probe answers again: a dead worker must not
    // burn through the attempts of every queued job.
    std::lock_guard<std::mutex> lock(w->mu);
    w->healthy = false;
    w->last_error = result.status.ToString();
  }
  if (result.worker_lost || (stopping && !result.status.ok())) {
    // Not the job's fault: it runs again (elsewhere, or after a restart).
    const std::string reason = result.worker_lost
                                   ? absl::StrCat("worker ", w->worker->name(), " lost: ", result.status.message())
                                   : absl::StrCat("scheduler ", options_.name, " stopped");
    recorded = store_->Requeue(job.job_id, job.attempts, reason, now);
    outcome = "requeued";
  } else {
    jobs::AttemptOutcome o;
    o.peak_device_bytes = result.peak_device_bytes;
    if (result.status.ok()) {
      o.state = JobState::kSucceeded;
      o.result = result.result.SerializeAsString();
      for (const v1::ResultFile& f : result.result.files()) o.result_bytes += f.bytes();
      outcome = "succeeded";
    } else {
      o.state = result.status.code() == absl::StatusCode::kCancelled ? JobState::kCancelled : JobState::kFailed;
      o.error_code = static_cast<int>(result.status.code());
      o.error_message = std::string(result.status.message());
      outcome = o.state == JobState::kCancelled ? "cancelled" : "failed";
    }
    recorded = store_->Finish(job.job_id, job.attempts, o, now);
  }
  GetCounter(Metrics().outcomes, {{"kind", kind}, {"outcome", outcome}}).Increment();
  TESSERA_LOG(INFO) << "scheduler: job " << job.job_id << " attempt " << job.attempts << " on "
                    << w->worker->name() << ": " << outcome
                    << (result.status.ok() ? std::string() : absl::StrCat(" (", result.status.ToString(), ")"))
                    << (recorded.ok() ? std::string() : absl::StrCat("; not recorded: ", recorded.ToString()));
  Notify();
}

// ---------------------------------------------------------------- keeper

void Scheduler::ProbeWorkers() {
  for (const std::unique_ptr<WorkerState>& w : workers_) {
    absl::StatusOr<v1::WorkerInfo> info = w->worker->Describe();
    bool became_healthy = false;
    {
      std::lock_guard<std::mutex> lock(w->mu);
      if (info.ok()) {
        became_healthy = !w->healthy;
        w->healthy = true;
        w->info = *std::move(info);
        w->last_error.clear();
      } else {
        if (w->healthy) {
          TESSERA_LOG(WARNING) << "scheduler: worker " << w->worker->name() << " is unhealthy: " << info.status();
        }
        w->healthy = false;
        w->last_error = info.status().ToString();
      }
      GetGauge(Metrics().worker_healthy, {{"worker", w->worker->name()}}).Set(w->healthy ? 1 : 0);
    }
    if (became_healthy) Notify();
  }
}

void Scheduler::UpdateQueueMetrics() {
  absl::StatusOr<std::map<JobState, int64_t>> counts = store_->CountByState();
  if (!counts.ok()) return;
  for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded, JobState::kFailed,
                     JobState::kCancelled}) {
    auto it = counts->find(s);
    GetGauge(Metrics().jobs_by_state, {{"state", std::string(jobs::JobStateName(s))}})
        .Set(it == counts->end() ? 0 : static_cast<double>(it->second));
  }
}

namespace {

// Removes the files a job's result names and then their directory when it is
// left empty (<results>/<job>/), fsyncing each directory it changed.
absl::Status RemoveResultFiles(const v1::JobResult& result) {
  std::set<fs::path> dirs;
  for (const v1::ResultFile& f : result.files()) {
    const fs::path path(f.path());
    if (path.empty() || !path.is_absolute()) continue;  // not a local file this process wrote
    std::error_code ec;
    fs::remove(path, ec);
    if (ec) return absl::InternalError(absl::StrCat("cannot delete result file ", f.path(), ": ", ec.message()));
    dirs.insert(path.parent_path());
  }
  // Deepest first: a series folder ("warped_dicom/") before the job's folder.
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    const fs::path& dir = *it;
    std::error_code ec;
    if (fs::is_empty(dir, ec) && !ec) fs::remove(dir, ec);
    TESSERA_RETURN_IF_ERROR(SyncDirectory(dir.parent_path().string()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<v1::JobInfo> Scheduler::DeleteResults(const std::string& job_id, const std::string& reason) {
  TESSERA_ASSIGN_OR_RETURN(JobRecord job, store_->Get(job_id));
  if (job.state == JobState::kQueued || job.state == JobState::kRunning) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job_id, "' is ", JobStateName(job.state),
                                                      ": cancel it first, then delete it"));
  }
  if (job.deleted_ms == 0 && !job.result.empty()) {
    v1::JobResult result;
    if (result.ParseFromString(job.result)) TESSERA_RETURN_IF_ERROR(RemoveResultFiles(result));
  }
  // The files first: a crash in between leaves a row whose files are gone
  // (GetResult then fails on them), never files no row names.
  TESSERA_ASSIGN_OR_RETURN(JobRecord deleted, store_->MarkResultsDeleted(job_id, reason, NowMs()));
  TESSERA_LOG(INFO) << "scheduler: results of job " << job_id << " deleted (" << reason << ")";
  return ToJobInfo(deleted);
}

absl::Status Scheduler::CheckResultsBudget() {
  TESSERA_ASSIGN_OR_RETURN(int64_t held, store_->ResultBytesHeld());
  if (held < options_.results_max_bytes) return absl::OkStatus();
  // Expired results first (the periodic sweep may not have reached them yet).
  TESSERA_RETURN_IF_ERROR(SweepExpiredResults().status());
  TESSERA_ASSIGN_OR_RETURN(held, store_->ResultBytesHeld());
  if (held < options_.results_max_bytes) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "finished jobs' results hold ", held, " bytes, the budget of --results-max-bytes=", options_.results_max_bytes,
      ": delete results (tessera job delete) or wait for their retention"));
}

absl::StatusOr<int> Scheduler::SweepExpiredResults() {
  if (options_.job_retention <= absl::ZeroDuration()) return 0;
  const int64_t before = NowMs() - absl::ToInt64Milliseconds(options_.job_retention);
  TESSERA_ASSIGN_OR_RETURN(std::vector<JobRecord> expired, store_->EndedBefore(before, 1000));
  const std::string reason = absl::StrCat("retention ", absl::FormatDuration(options_.job_retention));
  int deleted = 0;
  for (const JobRecord& job : expired) {
    absl::StatusOr<v1::JobInfo> info = DeleteResults(job.job_id, reason);
    if (!info.ok()) {
      TESSERA_LOG(WARNING) << "scheduler: retention: job " << job.job_id << ": " << info.status();
      continue;
    }
    ++deleted;
  }
  return deleted;
}

void Scheduler::KeeperLoop() {
  absl::Time next_retention_sweep = absl::InfinitePast();
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait_for(lock, absl::ToChronoMilliseconds(options_.heartbeat), [&] { return stopping_; });
      if (stopping_) return;
    }
    const int64_t now = NowMs();
    std::vector<std::shared_ptr<Active>> active;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& [id, a] : active_) active.push_back(a);
    }
    for (const std::shared_ptr<Active>& a : active) {
      absl::StatusOr<bool> cancel =
          store_->RenewLease(a->job_id, a->attempt, now + absl::ToInt64Milliseconds(options_.lease));
      // Cancelled through another replica, or no longer ours (re-queued
      // elsewhere after a long stall): stop the work.
      if (!cancel.ok() || *cancel) a->cancel.store(true);
    }
    absl::StatusOr<std::vector<std::string>> recovered = store_->RecoverExpired(now);
    if (recovered.ok() && !recovered->empty()) {
      for (const std::string& id : *recovered) TESSERA_LOG(INFO) << "scheduler: recovered job " << id;
      Notify();
    }
    ProbeWorkers();
    UpdateQueueMetrics();
    if (absl::Now() >= next_retention_sweep) {
      next_retention_sweep = absl::Now() + options_.retention_sweep_interval;
      absl::StatusOr<int> swept = SweepExpiredResults();
      if (!swept.ok()) TESSERA_LOG(WARNING) << "scheduler: retention sweep: " << swept.status();
    }
  }
}

}  // namespace tessera::scheduler
