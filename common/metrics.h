// Prometheus metrics for the whole process, over prometheus-cpp.
//
//   auto& requests = tessera::CounterFamily("tessera_jobs_total", "Jobs run.");
//   requests.Add({{"kind", "affine"}}).Increment();
//   auto server = tessera::MetricsHttpServer::Start("127.0.0.1", 0);  // port 0: a free one
//   // http://127.0.0.1:<(*server)->port()>/metrics serves the Prometheus text format.
//
// Family helpers are get-or-create: calling one again with the same name returns
// the same family, so code can look families up where it uses them. Metric and
// label names must be valid Prometheus names (a programming error otherwise:
// prometheus-cpp throws std::invalid_argument), and one name keeps one type.
#ifndef TESSERA_COMMON_METRICS_H_
#define TESSERA_COMMON_METRICS_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace prometheus {
class Exposer;
}

namespace tessera {

// The process-wide registry that MetricsHttpServer serves by default.
std::shared_ptr<prometheus::Registry> ProcessRegistry();

prometheus::Family<prometheus::Counter>& CounterFamily(absl::string_view name, absl::string_view help);
prometheus::Family<prometheus::Gauge>& GaugeFamily(absl::string_view name, absl::string_view help);
prometheus::Family<prometheus::Histogram>& HistogramFamily(absl::string_view name, absl::string_view help);
// The same in another registry (tests use their own).
prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& registry, absl::string_view name,
                                                       absl::string_view help);
prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& registry, absl::string_view name,
                                                   absl::string_view help);
prometheus::Family<prometheus::Histogram>& HistogramFamily(prometheus::Registry& registry, absl::string_view name,
                                                           absl::string_view help);

// Get-or-create one labelled metric of a family. A histogram's buckets are
// fixed by its first creation.
prometheus::Counter& GetCounter(prometheus::Family<prometheus::Counter>& family, const prometheus::Labels& labels);
prometheus::Gauge& GetGauge(prometheus::Family<prometheus::Gauge>& family, const prometheus::Labels& labels);
prometheus::Histogram& GetHistogram(prometheus::Family<prometheus::Histogram>& family,
                                    const prometheus::Labels& labels,
                                    const prometheus::Histogram::BucketBoundaries& buckets);

// Seconds, 1 ms .. 10 min: from a health check to a long registration job.
const prometheus::Histogram::BucketBoundaries& LatencyBucketsSeconds();

// The registry in the Prometheus text exposition format (what /metrics serves).
std::string SerializeMetrics(const prometheus::Registry& registry);

// Sets, for every GPU this process sees (DeviceRegistry), the gauges
//   tessera_gpu_memory_used_bytes{gpu="N"}, tessera_gpu_memory_total_bytes{gpu="N"}
// (the driver's view, all processes) and, from Tessera's own Buffer accounting,
//   tessera_device_memory_current_bytes{gpu="N"}, tessera_device_memory_peak_bytes{gpu="N"}.
// Without a GPU the families exist but have no samples. Thread-safe.
void UpdateGpuMemoryMetrics(prometheus::Registry& registry);
void UpdateGpuMemoryMetrics();  // in ProcessRegistry()

// Serves `registry` as http://host:port/metrics until destroyed.
class MetricsHttpServer {
 public:
  // `host` is an IP address or name to bind ("127.0.0.1", "0.0.0.0", "::1");
  // port 0 picks a free port (see port()). `before_scrape`, when given, runs
  // on each scrape before the registry is collected (e.g. to refresh gauges),
  // possibly on several HTTP threads at once. UNAVAILABLE when the address
  // cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry = ProcessRegistry(),
      std::function<void()> before_scrape = nullptr);

  ~MetricsHttpServer();
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  // The port actually listened on.
  int port() const { return port_; }

 private:
  MetricsHttpServer() = default;
  std::shared_ptr<prometheus::Collectable> hook_;
  std::shared_ptr<prometheus::Registry> registry_;
  std::unique_ptr<prometheus::Exposer> exposer_;
  std::string host_;
  int port_ = 0;
};

// "host:port", with brackets around an IPv6 literal ("[::1]:9464").
std::string JoinHostPort(absl::string_view host, int port);

}  // namespace tessera

#endif  // TESSERA_COMMON_METRICS_H_
