// A place where jobs run: the scheduler's own process (InProcessWorker) or a
// `tessera serve --role worker` process reached over gRPC (RemoteWorker). The
// scheduler asks each worker what it is (Describe: engines, devices, free
// memory, health) and hands it one claimed job attempt at a time per slot.
#ifndef TESSERA_SERVICES_SCHEDULER_WORKER_H_
#define TESSERA_SERVICES_SCHEDULER_WORKER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/jobs/job_types.h"
#include "tessera/v1/jobs.pb.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::scheduler {

// One attempt of one job, as handed to a worker.
struct AttemptCall {
  std::string job_id;
  int attempt = 1;
  v1::JobSpec spec;
  absl::Time deadline = absl::InfiniteFuture();
  const std::atomic<bool>* cancel = nullptr;  // set to stop the work
  std::function<void(const jobs::JobProgress&)> on_progress;
};

struct AttemptResult {
  // The worker went away mid-attempt (process died, connection lost): the job
  // is re-queued, not failed. `status` says why.
  bool worker_lost = false;
  absl::Status status;          // OK: succeeded; CANCELLED; DEADLINE_EXCEEDED; any other: failed
  v1::JobResult result;         // when OK (job_id and kind set by the worker)
  int64_t peak_device_bytes = 0;
};

class Worker {
 public:
  virtual ~Worker() = default;
  virtual const std::string& name() const = 0;
  // Engines, devices, free memory, slots. An error means unhealthy.
  virtual absl::StatusOr<v1::WorkerInfo> Describe() = 0;
  // Runs the attempt to its end (blocking). Called from up to `slots`
  // scheduler threads at once.
  virtual AttemptResult Execute(const AttemptCall& call) = 0;
};

// The devices this process has, for WorkerInfo.devices ("cpu" always; each
// CUDA device with its total and free memory).
std::vector<v1::WorkerDevice> LocalDevices();

}  // namespace tessera::scheduler

#endif  // TESSERA_SERVICES_SCHEDULER_WORKER_H_
