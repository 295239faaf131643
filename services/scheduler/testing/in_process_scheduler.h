// A scheduler as `tessera serve` runs it (role all: an in-process worker, a
// SQLite job store, result files under a state directory), for the tests of
// services that submit their jobs to it (RegistrationService, SomAtlasService).
// Its heartbeat, polls and progress interval are short so tests run quickly.
//
//   TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const jobs::Engine> engine, MyEngine::Create(...));
//   TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<InProcessScheduler> jobs,
//                            InProcessScheduler::Start(state_dir, {engine}));
//   service->AttachScheduler(&jobs->scheduler(), jobs->state_dir());
//
// Destroying it stops the scheduler (running attempts are cancelled and
// re-queued, as when a server stops); another InProcessScheduler on the same
// state directory finds every job and result again: a restart.
#ifndef TESSERA_SERVICES_SCHEDULER_TESTING_IN_PROCESS_SCHEDULER_H_
#define TESSERA_SERVICES_SCHEDULER_TESTING_IN_PROCESS_SCHEDULER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/jobs/engine.h"
#include "services/scheduler/in_process_worker.h"
#include "services/scheduler/scheduler.h"

namespace tessera::scheduler::testing {

// The scheduler's own options (its worker is "<name>/local"), with short
// timings so tests run quickly, and the worker's slots.
struct InProcessSchedulerOptions : SchedulerOptions {
  InProcessSchedulerOptions() {
    name = "test";
    heartbeat = absl::Milliseconds(50);
    lease = absl::Seconds(3);
    idle_poll = absl::Milliseconds(25);
    progress_interval = absl::Milliseconds(100);
  }
  int slots = 1;  // jobs run at once
};

class InProcessScheduler {
 public:
  // Creates `state_dir` (and <state_dir>/results), opens the store
  // <state_dir>/jobs.db, registers `engines` and starts the scheduler (which
  // re-queues what an earlier one on this directory left running).
  static absl::StatusOr<std::unique_ptr<InProcessScheduler>> Start(
      const std::string& state_dir, const std::vector<std::shared_ptr<const jobs::Engine>>& engines,
      InProcessSchedulerOptions options = {});
  // Stops the scheduler, then frees the worker and the engines.
  ~InProcessScheduler();
  InProcessScheduler(const InProcessScheduler&) = delete;
  InProcessScheduler& operator=(const InProcessScheduler&) = delete;

  Scheduler& scheduler() { return *scheduler_; }
  const jobs::EngineRegistry& engines() const { return *engines_; }
  const std::string& state_dir() const { return state_dir_; }
  const std::string& results_dir() const { return results_dir_; }

  // Polls until the job has ended (SUCCEEDED, FAILED or CANCELLED);
  // DEADLINE_EXCEEDED after `timeout`.
  absl::StatusOr<v1::JobInfo> WaitUntilEnded(const std::string& job_id, absl::Duration timeout);

 private:
  InProcessScheduler() = default;

  std::string state_dir_, results_dir_;
  std::unique_ptr<jobs::EngineRegistry> engines_;
  std::unique_ptr<InProcessWorker> worker_;
  std::unique_ptr<Scheduler> scheduler_;  // last: stopped and destroyed first
};

}  // namespace tessera::scheduler::testing

#endif  // TESSERA_SERVICES_SCHEDULER_TESTING_IN_PROCESS_SCHEDULER_H_
