// The scheduler: takes jobs of any engine, keeps them in the durable JobStore,
// hands them to workers and records what happens, so that nothing
// acknowledged is lost when a scheduler or a worker dies.
//
//   Submit   idempotency first (a known request_id: the same request gets its
//            job whatever its state, another ALREADY_EXISTS), then validate
//            with the engine -> a QUEUED row (RESOURCE_EXHAUSTED with a
//            retry-after hint when the priority's queue is full)
//   dispatch one thread per worker slot claims the best queued job the worker
//            can run (JobStore::ClaimNext: priority, age, kind, GPU, free
//            memory), runs it (Worker::Execute), records progress (throttled)
//            and the outcome; a worker lost mid-job re-queues it (up to its
//            max_attempts, then FAILED with the reason)
//   keeper   every heartbeat: renews the leases of running attempts (and picks
//            up cancels made through other replicas), re-queues jobs whose lease
//            expired (a dead scheduler's), fails queued jobs past their
//            deadline, probes the workers' health and updates the metrics
//   Watch    replays a job's events after a sequence number, then follows it
//
// Plain C++: the gRPC adapter is SchedulerServiceImpl.
#ifndef TESSERA_SERVICES_SCHEDULER_SCHEDULER_H_
#define TESSERA_SERVICES_SCHEDULER_SCHEDULER_H_

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/jobs/engine.h"
#include "services/jobs/job_store.h"
#include "services/scheduler/worker.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::scheduler {

struct SchedulerOptions {
  // Names this scheduler's in-process workers ("<name>/local"); on start, jobs
  // left RUNNING on them by an earlier incarnation are re-queued at once.
  std::string name = "scheduler";
  // QUEUED jobs beyond which Submit is RESOURCE_EXHAUSTED: the whole queue,
  // and one principal's jobs (JobRecord::owner; < 0: no limit).
  int64_t max_queued = 256;
  int64_t max_queued_per_principal = 64;
  int default_max_attempts = 3;
  absl::Duration lease = absl::Seconds(10);
  absl::Duration heartbeat = absl::Seconds(1);
  absl::Duration idle_poll = absl::Milliseconds(250);
  absl::Duration progress_interval = absl::Milliseconds(200);
  absl::Duration retry_after = absl::Seconds(2);  // hint with RESOURCE_EXHAUSTED
  absl::Duration worker_probe_timeout = absl::Seconds(2);
  // Finished jobs' results (files and stored result) are deleted this long
  // after the job ended; the job stays listed as a tombstone. 0: kept forever.
  absl::Duration job_retention = absl::ZeroDuration();
  absl::Duration retention_sweep_interval = absl::Minutes(1);
  // Result files (of jobs not deleted) beyond which Submit answers
  // RESOURCE_EXHAUSTED naming the budget, after deleting expired results.
  // 0: no budget.
  int64_t results_max_bytes = 0;
};

// How a submit is taken, beyond the request itself.
struct SubmitOptions {
  // JobSpec.request_fingerprint to store and compare with a known
  // request_id's (a service passes the fingerprint of its client's request,
  // whose durable copy it submits); empty: SpecFingerprint of the spec.
  std::string request_fingerprint;
  // FAILED_PRECONDITION when the engine says the job needs a GPU and no
  // worker has one, instead of queueing a job no worker can run now.
  bool require_gpu_worker = false;
  // The request's name for its idempotency key, in messages ("job_id").
  std::string id_field = "request_id";
  // The submitting principal ("" without authentication) and the gallery the
  // job touches ("" for none): who may see it (services/jobs/job_access.h).
  std::string owner;
  std::string gallery;
  // The job's W3C trace id (JobInfo.trace_id); "": the calling thread's current trace
  // (common/trace_context.h: the submitting call's, set by the server's trace interceptor).
  std::string trace_id;
  // Whether the caller may use the results of a job the spec reads
  // (Engine::ReferencedJobs): set by SchedulerService from the call's
  // identity; each referenced job must exist in this scheduler's store and
  // pass it (else NOT_FOUND, worded as for a missing job). Unset (services
  // that checked the references themselves): not checked here.
  std::function<absl::Status(const jobs::JobRecord&)> may_read_job;
};

struct WorkerSlots {
  std::shared_ptr<Worker> worker;
  int slots = 1;
};

class Scheduler {
 public:
  // `engines` (validation of submitted specs) must outlive the scheduler.
  Scheduler(SchedulerOptions options, std::unique_ptr<jobs::JobStore> store, const jobs::EngineRegistry* engines,
            std::vector<WorkerSlots> workers);
  // Stop().
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Re-queues the jobs an earlier incarnation left running on this
  // scheduler's in-process workers, then starts the dispatch and keeper
  // threads.
  absl::Status Start();
  // Stops taking work: running attempts are cancelled and re-queued (so a
  // restarted scheduler runs them again); joins the threads. Idempotent.
  void Stop();

  absl::StatusOr<v1::JobInfo> Submit(const v1::SubmitJobRequest& request, const SubmitOptions& options = {});
  // The job `request_id` names, when it was submitted with `fingerprint` (or
  // stored before fingerprints: taken as the same); NOT_FOUND when the id is
  // new; ALREADY_EXISTS naming the id when it names another request (another
  // kind, or another spec) or, with a non-empty `owner`, another owner's job.
  // `id_field` names the key in that message.
  absl::StatusOr<jobs::JobRecord> FindSameRequest(const std::string& request_id, const std::string& fingerprint,
                                                  const std::string& id_field = "request_id",
                                                  const std::string& owner = "");
  // Whether a worker has a device other than the CPU (as last described).
  bool HasGpuWorker();
  absl::StatusOr<v1::JobInfo> Get(const std::string& job_id);
  absl::StatusOr<v1::JobInfo> Cancel(const std::string& job_id);
  absl::StatusOr<v1::JobResult> GetResult(const std::string& job_id);
  // Deletes an ended job's result files (each named by its result, then their
  // directory when empty; fsynced) and erases its stored result, keeping the
  // job as a tombstone with `reason` (JobStore::MarkResultsDeleted). Again:
  // unchanged. FAILED_PRECONDITION while it is queued or running.
  absl::StatusOr<v1::JobInfo> DeleteResults(const std::string& job_id, const std::string& reason);
  // Deletes the results of jobs ended longer ago than options.job_retention
  // (0: never); how many. The keeper thread calls it once a minute.
  absl::StatusOr<int> SweepExpiredResults();
  // OK while the results held are within options.results_max_bytes (expired
  // ones deleted first); RESOURCE_EXHAUSTED naming the budget otherwise.
  absl::Status CheckResultsBudget();
  // `restrict` narrows the filter to what the caller may see (or refuses it):
  // services/jobs/job_access.h's RestrictListing, from SchedulerService.
  absl::StatusOr<v1::ListJobsResponse> List(const v1::ListJobsRequest& request,
                                            const std::function<absl::Status(jobs::JobFilter*)>& restrict = nullptr);
  std::vector<v1::WorkerInfo> Workers();

  // Sends the job's events after `after_sequence` and then new ones as they
  // happen, until the job ends (OK after its terminal event), `send` returns
  // false (UNAVAILABLE) or `stopped` returns true (CANCELLED).
  absl::Status Watch(const std::string& job_id, int64_t after_sequence,
                     const std::function<bool(const v1::JobEvent&)>& send, const std::function<bool()>& stopped);

  jobs::JobStore& store() { return *store_; }

 private:
  struct Active;
  struct WorkerState;
  void DispatchLoop(WorkerState* worker);
  void RunAttempt(WorkerState* worker, const jobs::JobRecord& job);
  void KeeperLoop();
  void ProbeWorkers();
  void Notify();
  void WaitForChange(int64_t seen_version, absl::Duration timeout);
  void UpdateQueueMetrics();
  // The kind a worker runs for `kind` (or, when empty, for the spec type);
  // "" when none does.
  std::string WorkerKindFor(const std::string& kind, const std::string& type_url);

  const SchedulerOptions options_;
  std::unique_ptr<jobs::JobStore> store_;
  const jobs::EngineRegistry* engines_;
  std::vector<std::unique_ptr<WorkerState>> workers_;

  std::mutex mu_;
  std::condition_variable changed_;
  int64_t version_ = 0;
  bool stopping_ = false;
  bool started_ = false;
  std::map<std::string, std::shared_ptr<Active>> active_;  // job id -> running attempt here
  std::vector<std::thread> threads_;
};

}  // namespace tessera::scheduler

#endif  // TESSERA_SERVICES_SCHEDULER_SCHEDULER_H_
