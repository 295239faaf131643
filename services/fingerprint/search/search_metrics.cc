#include "services/fingerprint/search/search_metrics.h"

#include <utility>

namespace tessera {
namespace fingerprint {
namespace {

const prometheus::Histogram::BucketBoundaries& QueueBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.0001, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
  return *buckets;
}

const prometheus::Histogram::BucketBoundaries& BatchSizeBuckets() {
  static const auto* buckets =
      new prometheus::Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};
  return *buckets;
}

const char* OutcomeName(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kOk:
      return "ok";
    case absl::StatusCode::kResourceExhausted:
      return "rejected";
    case absl::StatusCode::kCancelled:
      return "cancelled";
    case absl::StatusCode::kDeadlineExceeded:
      return "deadline_exceeded";
    default:
      return "error";
  }
}

}  // namespace

SearchMetrics::SearchMetrics(std::shared_ptr<prometheus::Registry> registry)
    : registry_(registry != nullptr ? std::move(registry) : ProcessRegistry()) {
  prometheus::Registry& r = *registry_;
  queue_depth_ = &GetGauge(GaugeFamily(r, "tessera_fingerprint_search_queue_depth",
                                       "Single-probe fingerprint searches waiting to be batched."),
                           {});
  running_ = &GetGauge(GaugeFamily(r, "tessera_fingerprint_search_running",
                                   "Fingerprint search batches (or unbatched calls) being computed."),
                       {});
  queue_seconds_ = &HistogramFamily(r, "tessera_fingerprint_search_queue_seconds",
                                    "Time a fingerprint search waited in the batching queue, in seconds.");
  compute_seconds_ = &HistogramFamily(r, "tessera_fingerprint_search_compute_seconds",
                                      "Scoring time of a fingerprint search batch (or unbatched call), in seconds.");
  batch_size_ = &HistogramFamily(r, "tessera_fingerprint_search_batch_size",
                                 "Fingerprint searches run together in one batch (1 when unbatched).");
  outcomes_ = &CounterFamily(r, "tessera_fingerprint_searches_total",
                             "Fingerprint searches by outcome (rejected: the batching queue was full).");
}

void SearchMetrics::ObserveBatch(const std::string& matcher, int size, double compute_seconds) {
  GetHistogram(*batch_size_, {{"matcher", matcher}}, BatchSizeBuckets()).Observe(size);
  GetHistogram(*compute_seconds_, {{"matcher", matcher}}, LatencyBucketsSeconds()).Observe(compute_seconds);
}

void SearchMetrics::ObserveQueueTime(const std::string& matcher, double seconds) {
  GetHistogram(*queue_seconds_, {{"matcher", matcher}}, QueueBuckets()).Observe(seconds);
}

void SearchMetrics::CountOutcome(const absl::Status& status) {
  GetCounter(*outcomes_, {{"outcome", OutcomeName(status)}}).Increment();
}

}  // namespace fingerprint
}  // namespace tessera
