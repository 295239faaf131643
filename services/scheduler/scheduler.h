// The scheduler: takes jobs of any engine, keeps them in the durable JobStore,
// hands them to workers and records what happens, so that nothing
// acknowledged is lost when a scheduler or a worker dies.
//
//   Submit   validate with the engine -> a QUEUED row (idempotent on request_id;
//            RESOURCE_EXHAUSTED with a retry-after hint when the priority's
//            queue is full)
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
  int64_t max_queued_per_priority = 256;
  int default_max_attempts = 3;
  absl::Duration lease = absl::Seconds(10);
  absl::Duration heartbeat = absl::Seconds(1);
  absl::Duration idle_poll = absl::Milliseconds(250);
  absl::Duration progress_interval = absl::Milliseconds(200);
  absl::Duration retry_after = absl::Seconds(2);  // hint with RESOURCE_EXHAUSTED
  absl::Duration worker_probe_timeout = absl::Seconds(2);
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

  absl::StatusOr<v1::JobInfo> Submit(const v1::SubmitJobRequest& request);
  absl::StatusOr<v1::JobInfo> Get(const std::string& job_id);
  absl::StatusOr<v1::JobInfo> Cancel(const std::string& job_id);
  absl::StatusOr<v1::JobResult> GetResult(const std::string& job_id);
  absl::StatusOr<v1::ListJobsResponse> List(const v1::ListJobsRequest& request);
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
