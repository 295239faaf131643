// Dynamic batching of single-probe fingerprint searches, like the dynamic
// batchers of inference servers (Triton): concurrent Search calls wait in one
// bounded FIFO queue; a dispatcher thread takes the oldest one and the
// queued calls for the same matcher and filter up to max_batch_size, waiting at most
// max_queue_delay after the oldest arrived for more to come, and runs them as
// ONE call of the searcher's batch API (CPU: each gallery chunk scored for
// every probe; GPU: the ALFI dual-stream pipeline). The batch runs with the
// largest top_k of its members and each member gets its own top_k prefix:
// the top-k order is total (top_k.h), so results equal unbatched searches.
//
// Deadlines and cancellation are each caller's own: a waiting caller polls
// its check (every caller_poll_interval) and leaves the queue when it fails;
// a batch drops members whose check fails before it starts, skips their
// probes between gallery chunks while it runs (SearchControl::probe_wanted),
// and stops once none is left. Beyond max_queued waiting calls, Search fails
// at once with RESOURCE_EXHAUSTED and a retry-after estimate (queued batches
// times the recent batch time); the queue never holds more than max_queued.
//
//   SearchBatcher batcher(run_on_searcher, "lssr", {}, &metrics);
//   absl::StatusOr<BatchedSearchResult> r = batcher.Search({probe, 10, "", check});
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_SEARCH_BATCHER_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_SEARCH_BATCHER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/search/search_metrics.h"
#include "services/fingerprint/search/searcher.h"

namespace tessera {
namespace fingerprint {

struct SearchBatcherOptions {
  int max_batch_size = 64;                                  // 1: no batching (each call runs alone)
  absl::Duration max_queue_delay = absl::Milliseconds(2);   // the oldest call waits at most this for company
  int max_queued = 1024;                                    // waiting calls; beyond: RESOURCE_EXHAUSTED
  // A waiting caller checks its call this often (a running batch checks its
  // members every SearchControl::poll_interval; this only frees the queue
  // slot of a call abandoned while queued, and costs a wake-up per caller).
  absl::Duration caller_poll_interval = absl::Milliseconds(50);

  // INVALID_ARGUMENT naming the first bad field.
  absl::Status Validate() const;
};

struct BatchedSearch {
  std::vector<MinutiaPoint> probe;
  int top_k = 10;       // >= 1
  std::string matcher;  // "" for the default
  TemplateFilter filter;  // batched only with searches of the same matcher and filter
  // The caller's cancellation / deadline (SearchControl::check); thread-safe;
  // may be null. Called only while the caller waits in Search.
  std::function<absl::Status()> check;
};

struct BatchedSearchResult {
  std::vector<SearchCandidate> candidates;  // best first, at most top_k
  SearchStats stats;                        // of the batch it ran in
  int batch_size = 1;
  double queue_seconds = 0;    // enqueue -> its batch started
  double compute_seconds = 0;  // the batch's searcher call
};

class SearchBatcher {
 public:
  // The searcher's batch API (GallerySearcher::Search).
  using RunFn = std::function<absl::StatusOr<std::vector<std::vector<SearchCandidate>>>(
      const std::vector<std::vector<MinutiaPoint>>& probes, const SearchOptions& options, SearchStats* stats)>;

  // `default_matcher`: what an empty matcher means (such calls batch with
  // calls naming it). `metrics` (may be null) must outlive the batcher.
  // Options must be valid (SearchBatcherOptions::Validate).
  SearchBatcher(RunFn run, std::string default_matcher, SearchBatcherOptions options, SearchMetrics* metrics);
  // Fails the waiting calls with UNAVAILABLE, stops the running batch and
  // joins the dispatcher.
  ~SearchBatcher();
  SearchBatcher(const SearchBatcher&) = delete;
  SearchBatcher& operator=(const SearchBatcher&) = delete;

  // Blocks until the search is done (or runs it at once when batching is
  // off). RESOURCE_EXHAUSTED when the queue is full (*retry_after_ms, if
  // given, gets the hint), UNAVAILABLE while shutting down, the check's
  // status when the caller gave up, else the searcher's result.
  absl::StatusOr<BatchedSearchResult> Search(BatchedSearch request, int64_t* retry_after_ms = nullptr);

  // A call that is already a batch (SearchBatch): runs at once on the calling
  // thread, with the same metrics (batch size = probes).
  absl::StatusOr<std::vector<std::vector<SearchCandidate>>> RunNow(const std::vector<std::vector<MinutiaPoint>>& probes,
                                                                   const SearchOptions& options, SearchStats* stats);

  struct Counters {
    int64_t batches = 0;     // searcher calls made for queued searches
    int64_t searches = 0;    // queued searches that ran in a batch
    int64_t rejected = 0;    // RESOURCE_EXHAUSTED
    int queue_depth = 0;     // now
    int max_queue_depth = 0;  // since the last ResetMaxQueueDepth
  };
  Counters counters() const;
  void ResetMaxQueueDepth();
  const SearchBatcherOptions& options() const { return options_; }

 private:
  struct Pending;
  void DispatchLoop();
  void RunBatch(std::vector<std::shared_ptr<Pending>> batch);
  // OK while the member's caller still wants its result.
  static absl::Status MemberStatus(Pending& p);
  static void Finish(Pending& p, absl::StatusOr<BatchedSearchResult> result);
  void RemoveIfQueued(const std::shared_ptr<Pending>& p);
  int64_t RetryAfterMsLocked() const;
  std::string Normalize(const std::string& matcher) const { return matcher.empty() ? default_matcher_ : matcher; }

  const RunFn run_;
  const std::string default_matcher_;
  const SearchBatcherOptions options_;
  SearchMetrics* const metrics_;
  std::atomic<bool> stopping_{false};

  mutable std::mutex mu_;  // everything below
  std::condition_variable cv_;  // the dispatcher: arrivals, departures, shutdown
  std::list<std::shared_ptr<Pending>> queue_;
  std::map<std::string, int> queued_per_key_;
  double recent_batch_seconds_ = 0.01;  // moving average, for the retry-after hint
  Counters counters_;
  std::thread dispatcher_;  // last: started once the rest exists
};

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_SEARCH_BATCHER_H_
