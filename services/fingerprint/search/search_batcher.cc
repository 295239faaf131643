#include "services/fingerprint/search/search_batcher.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace fingerprint {
namespace {

using Clock = std::chrono::steady_clock;

double SecondsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

struct SearchBatcher::Pending {
  BatchedSearch request;
  std::string matcher;  // normalized
  std::string key;      // what batch-mates share: the matcher and the filter
  Clock::time_point enqueued;
  std::mutex mu;  // everything below
  std::condition_variable cv;
  bool done = false;
  bool left = false;  // the caller returned: its check must not be called any more
  absl::StatusOr<BatchedSearchResult> result = absl::UnknownError("search not run");
};

absl::Status SearchBatcherOptions::Validate() const {
  if (max_batch_size < 1) return absl::InvalidArgumentError("max_batch_size must be >= 1");
  if (max_queued < 1) return absl::InvalidArgumentError("max_queued_searches must be >= 1");
  if (max_queue_delay < absl::ZeroDuration()) return absl::InvalidArgumentError("max_queue_delay must be >= 0");
  if (caller_poll_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("caller_poll_interval must be > 0");
  }
  return absl::OkStatus();
}

SearchBatcher::SearchBatcher(RunFn run, std::string default_matcher, SearchBatcherOptions options,
                             SearchMetrics* metrics)
    : run_(std::move(run)),
      default_matcher_(std::move(default_matcher)),
      options_(std::move(options)),
      metrics_(metrics) {
  if (options_.max_batch_size > 1) dispatcher_ = std::thread([this] { DispatchLoop(); });
}

SearchBatcher::~SearchBatcher() {
  std::list<std::shared_ptr<Pending>> waiting;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    waiting.swap(queue_);
    queued_per_key_.clear();
    counters_.queue_depth = 0;
  }
  cv_.notify_all();
  if (metrics_ != nullptr) metrics_->queue_depth().Decrement(static_cast<double>(waiting.size()));
  for (const auto& p : waiting) Finish(*p, absl::UnavailableError("the fingerprint service is shutting down"));
  if (dispatcher_.joinable()) dispatcher_.join();
}

SearchBatcher::Counters SearchBatcher::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

void SearchBatcher::ResetMaxQueueDepth() {
  std::lock_guard<std::mutex> lock(mu_);
  counters_.max_queue_depth = counters_.queue_depth;
}

absl::Status SearchBatcher::MemberStatus(Pending& p) {
  std::lock_guard<std::mutex> lock(p.mu);
  if (p.left) return absl::CancelledError("the caller has gone");
  return p.request.check ? p.request.check() : absl::OkStatus();
}

void SearchBatcher::Finish(Pending& p, absl::StatusOr<BatchedSearchResult> result) {
  {
    std::lock_guard<std::mutex> lock(p.mu);
    if (p.done) return;
    p.result = std::move(result);
    p.done = true;
  }
  p.cv.notify_all();
}

int64_t SearchBatcher::RetryAfterMsLocked() const {
  // The queued batches (plus the running one) at the recent batch time.
  const int64_t batches = (static_cast<int64_t>(queue_.size()) + options_.max_batch_size - 1) /
                              options_.max_batch_size + 1;
  const double ms = std::ceil(batches * recent_batch_seconds_ * 1e3);
  return std::clamp<int64_t>(static_cast<int64_t>(ms), 1, 60000);
}

void SearchBatcher::RemoveIfQueued(const std::shared_ptr<Pending>& p) {
  bool removed = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = std::find(queue_.begin(), queue_.end(), p);
    if (it != queue_.end()) {
      queue_.erase(it);
      --queued_per_key_[p->key];
      --counters_.queue_depth;
      removed = true;
    }
  }
  if (removed) {
    if (metrics_ != nullptr) metrics_->queue_depth().Decrement();
    cv_.notify_all();  // the dispatcher may be waiting on this one
  }
}

absl::StatusOr<std::vector<std::vector<SearchCandidate>>> SearchBatcher::RunNow(
    const std::vector<std::vector<MinutiaPoint>>& probes, const SearchOptions& options, SearchStats* stats) {
  if (metrics_ != nullptr) metrics_->running().Increment();
  const auto start = Clock::now();
  auto results = run_(probes, options, stats);
  const double seconds = SecondsBetween(start, Clock::now());
  if (metrics_ != nullptr) {
    metrics_->running().Decrement();
    metrics_->ObserveBatch(Normalize(options.matcher), static_cast<int>(probes.size()), seconds);
  }
  return results;
}

absl::StatusOr<BatchedSearchResult> SearchBatcher::Search(BatchedSearch request, int64_t* retry_after_ms) {
  auto count = [this](absl::StatusOr<BatchedSearchResult> r) {
    if (metrics_ != nullptr) metrics_->CountOutcome(r.status());
    return r;
  };
  if (request.top_k < 1) return count(absl::InvalidArgumentError("top_k must be at least 1"));
  if (stopping_) return count(absl::UnavailableError("the fingerprint service is shutting down"));
  if (options_.max_batch_size <= 1) {
    // No batching: the caller's thread runs its own search.
    SearchControl control;
    control.check = request.check;
    SearchOptions options;
    options.top_k = request.top_k;
    options.matcher = request.matcher;
    options.filter = request.filter;
    options.control = &control;
    BatchedSearchResult out;
    const auto start = Clock::now();
    auto results = RunNow({request.probe}, options, &out.stats);
    if (!results.ok()) return count(results.status());
    out.candidates = std::move((*results)[0]);
    out.compute_seconds = SecondsBetween(start, Clock::now());
    return count(std::move(out));
  }

  auto p = std::make_shared<Pending>();
  p->request = std::move(request);
  p->matcher = Normalize(p->request.matcher);
  p->key = p->request.filter.empty() ? p->matcher : absl::StrCat(p->matcher, "|", p->request.filter.Key());
  p->enqueued = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return count(absl::UnavailableError("the fingerprint service is shutting down"));
    if (static_cast<int>(queue_.size()) >= options_.max_queued) {
      ++counters_.rejected;
      const int64_t retry = RetryAfterMsLocked();
      if (retry_after_ms != nullptr) *retry_after_ms = retry;
      return count(absl::ResourceExhaustedError(
          absl::StrCat("the fingerprint search queue is full (", queue_.size(), " searches waiting, the limit); retry after about ",
                       retry, " ms")));
    }
    queue_.push_back(p);
    ++queued_per_key_[p->key];
    ++counters_.queue_depth;
    counters_.max_queue_depth = std::max(counters_.max_queue_depth, counters_.queue_depth);
  }
  if (metrics_ != nullptr) metrics_->queue_depth().Increment();
  cv_.notify_all();

  const auto poll = absl::ToChronoNanoseconds(options_.caller_poll_interval);
  std::unique_lock<std::mutex> lock(p->mu);
  while (!p->done) {
    p->cv.wait_for(lock, poll);
    if (p->done || !p->request.check) continue;
    absl::Status live = p->request.check();
    if (!live.ok()) {
      // Gone: out of the queue if still there; a running batch skips it.
      p->left = true;
      lock.unlock();
      RemoveIfQueued(p);
      return count(live);
    }
  }
  p->left = true;
  return count(std::move(p->result));
}

void SearchBatcher::DispatchLoop() {
  const auto delay = absl::ToChronoNanoseconds(options_.max_queue_delay);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const std::shared_ptr<Pending> front = queue_.front();
    const auto due = front->enqueued + delay;
    // Gather company for the oldest call until the batch is full or it has
    // waited max_queue_delay.
    while (!stopping_ && !queue_.empty() && queue_.front() == front &&
           queued_per_key_[front->key] < options_.max_batch_size && Clock::now() < due) {
      cv_.wait_until(lock, due);
    }
    if (stopping_) return;
    if (queue_.empty() || queue_.front() != front) continue;  // it left: start over with the next
    std::vector<std::shared_ptr<Pending>> batch;
    for (auto it = queue_.begin(); it != queue_.end() && static_cast<int>(batch.size()) < options_.max_batch_size;) {
      if ((*it)->key == front->key) {
        batch.push_back(*it);
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    queued_per_key_[front->key] -= static_cast<int>(batch.size());
    counters_.queue_depth -= static_cast<int>(batch.size());
    lock.unlock();
    if (metrics_ != nullptr) metrics_->queue_depth().Decrement(static_cast<double>(batch.size()));
    RunBatch(std::move(batch));
    lock.lock();
  }
}

void SearchBatcher::RunBatch(std::vector<std::shared_ptr<Pending>> batch) {
  const auto start = Clock::now();
  // Calls whose callers have gone or given up never start.
  std::vector<std::shared_ptr<Pending>> members;
  for (auto& p : batch) {
    absl::Status live = MemberStatus(*p);
    if (live.ok()) {
      members.push_back(std::move(p));
    } else {
      Finish(*p, live);
    }
  }
  if (members.empty()) return;
  const std::string matcher = members[0]->matcher;
  std::vector<std::vector<MinutiaPoint>> probes;
  int top_k = 1;
  for (const auto& m : members) {
    probes.push_back(m->request.probe);
    top_k = std::max(top_k, m->request.top_k);
  }
  SearchControl control;
  control.check = [&]() -> absl::Status {
    if (stopping_) return absl::UnavailableError("the fingerprint service is shutting down");
    for (const auto& m : members) {
      if (MemberStatus(*m).ok()) return absl::OkStatus();
    }
    return absl::CancelledError("every caller of this search batch has gone");
  };
  control.probe_wanted = [&](int i) { return MemberStatus(*members[i]).ok(); };
  SearchOptions options;
  options.top_k = top_k;
  options.matcher = matcher;
  options.filter = members[0]->request.filter;
  options.control = &control;
  SearchStats stats;
  auto results = RunNow(probes, options, &stats);
  const auto end = Clock::now();
  const double compute = SecondsBetween(start, end);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++counters_.batches;
    counters_.searches += static_cast<int64_t>(members.size());
    recent_batch_seconds_ = 0.8 * recent_batch_seconds_ + 0.2 * compute;
  }
  const absl::StatusCode code = results.status().code();
  if (!results.ok() && members.size() > 1 && code != absl::StatusCode::kCancelled &&
      code != absl::StatusCode::kDeadlineExceeded && code != absl::StatusCode::kUnavailable) {
    // One bad probe must not fail the others: each runs alone for its own status.
    for (const auto& m : members) {
      SearchControl own;
      own.check = [&m] { return MemberStatus(*m); };
      SearchOptions alone = options;
      alone.top_k = m->request.top_k;
      alone.control = &own;
      BatchedSearchResult r;
      r.queue_seconds = SecondsBetween(m->enqueued, start);
      const auto t0 = Clock::now();
      auto one = RunNow({m->request.probe}, alone, &r.stats);
      r.compute_seconds = SecondsBetween(t0, Clock::now());
      if (!one.ok()) {
        Finish(*m, one.status());
        continue;
      }
      r.candidates = std::move((*one)[0]);
      Finish(*m, std::move(r));
    }
    return;
  }
  for (size_t i = 0; i < members.size(); ++i) {
    Pending& m = *members[i];
    const double queued = SecondsBetween(m.enqueued, start);
    if (metrics_ != nullptr) metrics_->ObserveQueueTime(matcher, queued);
    absl::Status live = MemberStatus(m);
    if (!live.ok()) {
      Finish(m, live);  // its probe may have been skipped
      continue;
    }
    if (!results.ok()) {
      Finish(m, results.status());
      continue;
    }
    BatchedSearchResult r;
    r.candidates = std::move((*results)[i]);
    if (static_cast<int>(r.candidates.size()) > m.request.top_k) r.candidates.resize(m.request.top_k);
    r.stats = stats;
    r.batch_size = static_cast<int>(members.size());
    r.queue_seconds = queued;
    r.compute_seconds = compute;
    Finish(m, std::move(r));
  }
}

}  // namespace fingerprint
}  // namespace tessera
