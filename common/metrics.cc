#include "common/metrics.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <exception>
#include <thread>
#include <sstream>
#include <utility>

#include <prometheus/collectable.h>
#include <prometheus/exposer.h>
#include <prometheus/text_serializer.h>

#include "absl/strings/str_cat.h"
#include "common/buffer.h"
#include "common/device.h"
#include "common/log.h"

namespace tessera {
namespace {

// Runs a callback when collected and contributes no metrics; registered with
// the Exposer ahead of the registry so the callback's updates are scraped.
class ScrapeHook : public prometheus::Collectable {
 public:
  explicit ScrapeHook(std::function<void()> fn) : fn_(std::move(fn)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    if (fn_) fn_();
    return {};
  }

 private:
  std::function<void()> fn_;
};

// Opens and closes a TCP connection to host:port (loopback for a wildcard
// address), ignoring failures.
void PokeListener(const std::string& host, int port) {
  std::string target = host;
  if (target.empty() || target == "0.0.0.0") target = "127.0.0.1";
  if (target == "::" || target == "[::]") target = "::1";
  if (target.size() > 2 && target.front() == '[' && target.back() == ']') target = target.substr(1, target.size() - 2);
  addrinfo hints;
  std::memset(&hints, 0, sizeof(hints));
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  if (getaddrinfo(target.c_str(), std::to_string(port).c_str(), &hints, &addresses) != 0) return;
  for (addrinfo* a = addresses; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const bool connected = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
    close(fd);
    if (connected) break;
  }
  freeaddrinfo(addresses);
}

}  // namespace

std::shared_ptr<prometheus::Registry> ProcessRegistry() {
  static const auto* registry = new std::shared_ptr<prometheus::Registry>(std::make_shared<prometheus::Registry>());
  return *registry;
}

prometheus::Family<prometheus::Counter>& CounterFamily(prometheus::Registry& registry, absl::string_view name,
                                                       absl::string_view help) {
  return prometheus::BuildCounter().Name(std::string(name)).Help(std::string(help)).Register(registry);
}

prometheus::Family<prometheus::Gauge>& GaugeFamily(prometheus::Registry& registry, absl::string_view name,
                                                   absl::string_view help) {
  return prometheus::BuildGauge().Name(std::string(name)).Help(std::string(help)).Register(registry);
}

prometheus::Family<prometheus::Histogram>& HistogramFamily(prometheus::Registry& registry, absl::string_view name,
                                                           absl::string_view help) {
  return prometheus::BuildHistogram().Name(std::string(name)).Help(std::string(help)).Register(registry);
}

prometheus::Family<prometheus::Counter>& CounterFamily(absl::string_view name, absl::string_view help) {
  return CounterFamily(*ProcessRegistry(), name, help);
}

prometheus::Family<prometheus::Gauge>& GaugeFamily(absl::string_view name, absl::string_view help) {
  return GaugeFamily(*ProcessRegistry(), name, help);
}

prometheus::Family<prometheus::Histogram>& HistogramFamily(absl::string_view name, absl::string_view help) {
  return HistogramFamily(*ProcessRegistry(), name, help);
}

prometheus::Counter& GetCounter(prometheus::Family<prometheus::Counter>& family, const prometheus::Labels& labels) {
  return family.Add(labels);
}

prometheus::Gauge& GetGauge(prometheus::Family<prometheus::Gauge>& family, const prometheus::Labels& labels) {
  return family.Add(labels);
}

prometheus::Histogram& GetHistogram(prometheus::Family<prometheus::Histogram>& family,
                                    const prometheus::Labels& labels,
                                    const prometheus::Histogram::BucketBoundaries& buckets) {
  return family.Add(labels, buckets);
}

const prometheus::Histogram::BucketBoundaries& LatencyBucketsSeconds() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
  return *buckets;
}

std::string SerializeMetrics(const prometheus::Registry& registry) {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry.Collect());
  return out.str();
}

void UpdateGpuMemoryMetrics(prometheus::Registry& registry) {
  auto& used = GaugeFamily(registry, "tessera_gpu_memory_used_bytes",
                           "Device memory in use on the GPU, all processes (cudaMemGetInfo).");
  auto& total = GaugeFamily(registry, "tessera_gpu_memory_total_bytes", "Device memory of the GPU.");
  auto& current = GaugeFamily(registry, "tessera_device_memory_current_bytes",
                              "Device memory currently held by Tessera buffers on the GPU.");
  auto& peak = GaugeFamily(registry, "tessera_device_memory_peak_bytes",
                           "Peak device memory held by Tessera buffers on the GPU since the last reset.");
  for (const GpuInfo& gpu : DeviceRegistry::Get().gpus()) {
    const prometheus::Labels labels = {{"gpu", std::to_string(gpu.ordinal)}};
    absl::StatusOr<GpuMemoryInfo> info = QueryGpuMemory(gpu.ordinal);
    if (info.ok()) {
      GetGauge(used, labels).Set(static_cast<double>(info->used_bytes()));
      GetGauge(total, labels).Set(static_cast<double>(info->total_bytes));
    } else {
      TESSERA_LOG(WARNING) << "GPU " << gpu.ordinal << " memory query failed: " << info.status();
    }
    const DeviceMemoryStats stats = GetDeviceMemoryStats(gpu.ordinal);
    GetGauge(current, labels).Set(static_cast<double>(stats.current_bytes));
    GetGauge(peak, labels).Set(static_cast<double>(stats.peak_bytes));
  }
}

void UpdateGpuMemoryMetrics() { UpdateGpuMemoryMetrics(*ProcessRegistry()); }

std::string JoinHostPort(absl::string_view host, int port) {
  if (host.find(':') != absl::string_view::npos && !host.empty() && host.front() != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& host, int port, std::shared_ptr<prometheus::Registry> registry,
    std::function<void()> before_scrape) {
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("metrics port ", port, " out of range 0..65535"));
  }
  if (registry == nullptr) return absl::InvalidArgumentError("MetricsHttpServer needs a registry");
  const std::string address = JoinHostPort(host, port);
  std::unique_ptr<MetricsHttpServer> server(new MetricsHttpServer());
  server->registry_ = std::move(registry);
  server->host_ = host;
  try {
    server->exposer_ = std::make_unique<prometheus::Exposer>(address, /*num_threads=*/2);
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot serve metrics on ", address, ": ", e.what()));
  }
  if (before_scrape) {
    // The Exposer collects in registration order, so the hook runs first.
    server->hook_ = std::make_shared<ScrapeHook>(std::move(before_scrape));
    server->exposer_->RegisterCollectable(server->hook_);
  }
  server->exposer_->RegisterCollectable(server->registry_);
  const std::vector<int> ports = server->exposer_->GetListeningPorts();
  if (ports.empty() || ports.front() <= 0) {
    return absl::UnavailableError(absl::StrCat("metrics server on ", address, " reports no listening port"));
  }
  server->port_ = ports.front();
  return server;
}

MetricsHttpServer::~MetricsHttpServer() {
  // Stop serving (joins the HTTP threads) before the hook and registry go.
  // civetweb's listener thread only sees the stop flag when its poll() returns,
  // which without traffic is every 2 s; connecting to it ends the wait at once.
  std::atomic<bool> stopped{false};
  std::thread waker([this, &stopped] {
    while (!stopped.load()) {
      PokeListener(host_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer_.reset();
  stopped = true;
  waker.join();
}

}  // namespace tessera
