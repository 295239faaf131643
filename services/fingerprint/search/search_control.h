// Stopping a search nobody waits for any more, and following its progress.
//
// A SearchControl travels with one search call (SearchOptions::control in
// searcher.h; the ALFI pipeline and the DMC matcher take a StopPoller made
// from it). The work polls it between gallery chunks, probes and pipeline
// batches, and (rate-limited, every poll_interval at most) inside its
// parallel loops, so an abandoned call stops after at most a few
// milliseconds of work per thread. Nothing here is global: each call brings
// its own check.
//
//   SearchControl control;
//   control.check = [&ctx] { return ctx.CheckContinue(); };  // CANCELLED / DEADLINE_EXCEEDED stop it
//   SearchOptions options;
//   options.control = &control;
//   searcher->Search(probes, options);
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_SEARCH_CONTROL_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_SEARCH_CONTROL_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace tessera {
namespace fingerprint {

struct SearchControl {
  // OK: go on. Any other status (CANCELLED, DEADLINE_EXCEEDED) stops the
  // search, which returns that status. Must be thread-safe: worker threads
  // may call it. Null: never stops.
  std::function<absl::Status()> check;
  // Optional: false once probe `i` (its index in the call) is no longer
  // wanted; its remaining gallery chunks are skipped and its result is left
  // incomplete (callers must not use it). Polled between chunks from the
  // searching thread.
  std::function<bool(int probe)> probe_wanted;
  // Optional: after each gallery chunk (or pipeline run), templates scored
  // so far and the total, per probe. Called from the searching thread.
  std::function<void(int64_t done, int64_t total)> progress;
  // Least time between two calls of `check` from inside parallel loops.
  absl::Duration poll_interval = absl::Milliseconds(2);
};

// A check that says CANCELLED once *cancel is true (null: never) and
// DEADLINE_EXCEEDED once `deadline` has passed.
std::function<absl::Status()> CancelFlagCheck(const std::atomic<bool>* cancel,
                                              absl::Time deadline = absl::InfiniteFuture());

// Polls one SearchControl for one search. Thread-safe.
class StopPoller {
 public:
  // `control` (may be null: never stops) must outlive the poller.
  explicit StopPoller(const SearchControl* control);
  StopPoller(const StopPoller&) = delete;
  StopPoller& operator=(const StopPoller&) = delete;

  // Cheap, for the inner loops of any thread: true once stopped; calls the
  // check when poll_interval has passed since the last call.
  bool ShouldStop();
  // Calls the check now (between chunks); true when the search must stop.
  bool StopNow();
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }
  // OK, or the status that stopped the search.
  absl::Status status() const;
  // How many times the check was called.
  int64_t polls() const { return polls_.load(std::memory_order_relaxed); }

 private:
  bool Poll();

  const std::function<absl::Status()>* check_ = nullptr;
  int64_t interval_ns_ = 0;
  std::atomic<int64_t> next_poll_ns_{0};
  std::atomic<bool> stopped_{false};
  std::atomic<int64_t> polls_{0};
  mutable std::mutex mu_;
  absl::Status status_;  // guarded by mu_
};

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_SEARCH_CONTROL_H_
