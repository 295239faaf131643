#include "services/fingerprint/search/search_control.h"

#include <chrono>

namespace tessera {
namespace fingerprint {
namespace {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::function<absl::Status()> CancelFlagCheck(const std::atomic<bool>* cancel, absl::Time deadline) {
  return [cancel, deadline]() -> absl::Status {
    if (cancel != nullptr && cancel->load()) return absl::CancelledError("the search was cancelled");
    if (deadline != absl::InfiniteFuture() && absl::Now() >= deadline) {
      return absl::DeadlineExceededError("the search passed its deadline");
    }
    return absl::OkStatus();
  };
}

StopPoller::StopPoller(const SearchControl* control) {
  if (control != nullptr && control->check) {
    check_ = &control->check;
    interval_ns_ = absl::ToInt64Nanoseconds(control->poll_interval);
  }
}

bool StopPoller::Poll() {
  polls_.fetch_add(1, std::memory_order_relaxed);
  absl::Status s = (*check_)();
  if (s.ok()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (status_.ok()) status_ = std::move(s);
  stopped_.store(true, std::memory_order_release);
  return true;
}

bool StopPoller::ShouldStop() {
  if (stopped()) return true;
  if (check_ == nullptr) return false;
  const int64_t now = NowNs();
  int64_t next = next_poll_ns_.load(std::memory_order_relaxed);
  if (now < next) return false;
  // One thread wins the right to poll this interval.
  if (!next_poll_ns_.compare_exchange_strong(next, now + interval_ns_, std::memory_order_relaxed)) return stopped();
  return Poll();
}

bool StopPoller::StopNow() {
  if (stopped()) return true;
  if (check_ == nullptr) return false;
  next_poll_ns_.store(NowNs() + interval_ns_, std::memory_order_relaxed);
  return Poll();
}

absl::Status StopPoller::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

}  // namespace fingerprint
}  // namespace tessera
