// The worker inside the scheduler's (or a worker server's) own process: runs
// engines from an EngineRegistry on the calling thread. Each attempt writes
// into <results_dir>/<job_id>.attempt-N.tmp/; on success the directory is
// renamed to <results_dir>/<job_id>/ (atomic), so a job's files are either
// all there or absent.
#ifndef TESSERA_SERVICES_SCHEDULER_IN_PROCESS_WORKER_H_
#define TESSERA_SERVICES_SCHEDULER_IN_PROCESS_WORKER_H_

#include <atomic>
#include <memory>
#include <string>

#include "services/jobs/engine.h"
#include "services/scheduler/worker.h"

namespace tessera::scheduler {

class InProcessWorker : public Worker {
 public:
  // `engines` must outlive the worker. `slots`: jobs run at once.
  InProcessWorker(std::string name, const jobs::EngineRegistry* engines, std::string results_dir, int slots);

  // Deletes <results_dir>/*.attempt-N.tmp folders: attempts of a process that
  // died mid-run (their jobs are re-queued). Call before any worker on that
  // folder starts; returns how many.
  static absl::StatusOr<int> RemoveLeftoverAttempts(const std::string& results_dir);

  const std::string& name() const override { return name_; }
  absl::StatusOr<v1::WorkerInfo> Describe() override;
  AttemptResult Execute(const AttemptCall& call) override;

 private:
  const std::string name_;
  const jobs::EngineRegistry* engines_;
  const std::string results_dir_;
  const int slots_;
  std::atomic<int> running_{0};
  std::atomic<int64_t> done_{0};
};

}  // namespace tessera::scheduler

#endif  // TESSERA_SERVICES_SCHEDULER_IN_PROCESS_WORKER_H_
