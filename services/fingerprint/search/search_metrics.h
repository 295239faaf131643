// Prometheus metrics of fingerprint searches (common/metrics.h), one set per
// registry:
//   tessera_fingerprint_search_queue_depth               gauge: single-probe searches waiting for a batch
//   tessera_fingerprint_search_running                   gauge: search batches / calls being computed
//   tessera_fingerprint_search_queue_seconds{matcher}    histogram: enqueue -> its batch starts
//   tessera_fingerprint_search_compute_seconds{matcher}  histogram: a batch's (or call's) scoring time
//   tessera_fingerprint_search_batch_size{matcher}       histogram: searches per batch (1 when unbatched)
//   tessera_fingerprint_searches_total{outcome}          counter: ok, rejected (queue full), cancelled,
//                                                        deadline_exceeded, error
// Gauges move by Increment/Decrement, so several services in one process
// (tests) add up instead of overwriting each other.
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_SEARCH_METRICS_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_SEARCH_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "common/metrics.h"

namespace tessera {
namespace fingerprint {

class SearchMetrics {
 public:
  // Null: ProcessRegistry().
  explicit SearchMetrics(std::shared_ptr<prometheus::Registry> registry = nullptr);

  prometheus::Gauge& queue_depth() { return *queue_depth_; }
  prometheus::Gauge& running() { return *running_; }
  // `matcher` as the searcher reports it ("lssr", "dmc").
  void ObserveBatch(const std::string& matcher, int size, double compute_seconds);
  void ObserveQueueTime(const std::string& matcher, double seconds);
  // Counts one finished search by its status (RESOURCE_EXHAUSTED: rejected).
  void CountOutcome(const absl::Status& status);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Gauge* queue_depth_;
  prometheus::Gauge* running_;
  prometheus::Family<prometheus::Histogram>* queue_seconds_;
  prometheus::Family<prometheus::Histogram>* compute_seconds_;
  prometheus::Family<prometheus::Histogram>* batch_size_;
  prometheus::Family<prometheus::Counter>* outcomes_;
};

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_SEARCH_METRICS_H_
