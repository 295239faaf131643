#include "services/jobs/worker_pool.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera::jobs {

WorkerPool::WorkerPool(int threads, int max_queued) : max_queued_(std::max(0, max_queued)) {
  threads = std::max(1, threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() { Shutdown(); }

absl::Status WorkerPool::TrySubmit(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return absl::UnavailableError("the server is shutting down");
  // Idle workers take tasks at once; beyond them at most max_queued_ wait.
  const int idle = static_cast<int>(threads_.size()) - running_;
  if (static_cast<int>(queue_.size()) >= max_queued_ + std::max(0, idle)) {
    return absl::ResourceExhaustedError(absl::StrCat("the job queue is full (", queue_.size(), " waiting, ",
                                                     running_, " running); try again later"));
  }
  queue_.push_back(std::move(task));
  ready_.notify_one();
  return absl::OkStatus();
}

void WorkerPool::Loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
      ++running_;
    }
    task();
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
  }
}

void WorkerPool::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    ready_.notify_all();
  }
  std::lock_guard<std::mutex> lock(join_mu_);
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

int WorkerPool::queued() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(queue_.size());
}

int WorkerPool::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

}  // namespace tessera::jobs
