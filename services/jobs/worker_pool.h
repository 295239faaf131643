// A fixed set of worker threads with a bounded queue, for services that run
// long jobs in the background (one registration at a time per worker).
//
//   WorkerPool pool(/*threads=*/1, /*max_queued=*/8);
//   TESSERA_RETURN_IF_ERROR(pool.TrySubmit([job] { Run(job); }));  // RESOURCE_EXHAUSTED when full
#ifndef TESSERA_SERVICES_JOBS_WORKER_POOL_H_
#define TESSERA_SERVICES_JOBS_WORKER_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"

namespace tessera::jobs {

class WorkerPool {
 public:
  WorkerPool(int threads, int max_queued);
  // Shutdown().
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task` unless, beyond the tasks idle workers are about to take,
  // `max_queued` are already waiting (RESOURCE_EXHAUSTED), or the pool is
  // shutting down (UNAVAILABLE). max_queued = 0: run now or refuse.
  absl::Status TrySubmit(std::function<void()> task);

  // Takes no more tasks, runs those already queued (callers make them quick,
  // e.g. by cancelling their jobs first), and joins the threads. Idempotent.
  void Shutdown();

  int queued() const;
  int running() const;
  int threads() const { return static_cast<int>(threads_.size()); }
  int max_queued() const { return max_queued_; }

 private:
  void Loop();

  const int max_queued_;
  mutable std::mutex mu_;
  std::condition_variable ready_;
  std::deque<std::function<void()>> queue_;
  int running_ = 0;
  bool stopping_ = false;
  std::mutex join_mu_;  // serializes Shutdown()'s joins
  std::vector<std::thread> threads_;
};

}  // namespace tessera::jobs

#endif  // TESSERA_SERVICES_JOBS_WORKER_POOL_H_
