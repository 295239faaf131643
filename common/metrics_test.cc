#include "common/metrics.h"

#include <atomic>
#include <memory>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/device.h"
#include "common/http_get.h"

namespace tessera {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(MetricsTest, FamiliesAreGetOrCreate) {
  prometheus::Registry registry;
  auto& a = CounterFamily(registry, "test_things_total", "Things.");
  auto& b = CounterFamily(registry, "test_things_total", "Things.");
  EXPECT_EQ(&a, &b);
  GetCounter(a, {{"kind", "x"}}).Increment(2);
  GetCounter(b, {{"kind", "x"}}).Increment();
  GetGauge(GaugeFamily(registry, "test_level", "Level."), {}).Set(7);
  auto& h = GetHistogram(HistogramFamily(registry, "test_seconds", "Latency."), {{"op", "y"}},
                         LatencyBucketsSeconds());
  h.Observe(0.003);
  const std::string text = SerializeMetrics(registry);
  EXPECT_THAT(text, HasSubstr("test_things_total{kind=\"x\"} 3"));
  EXPECT_THAT(text, HasSubstr("test_level 7"));
  EXPECT_THAT(text, HasSubstr("test_seconds_bucket{op=\"y\",le=\"0.005\"} 1"));
  EXPECT_THAT(text, HasSubstr("test_seconds_count{op=\"y\"} 1"));
}

TEST(MetricsTest, ProcessRegistryIsShared) {
  EXPECT_EQ(ProcessRegistry().get(), ProcessRegistry().get());
  GetCounter(CounterFamily("test_process_total", "Process counter."), {}).Increment();
  EXPECT_THAT(SerializeMetrics(*ProcessRegistry()), HasSubstr("test_process_total 1"));
}

TEST(MetricsTest, HttpServerServesMetricsOnAFreePort) {
  auto registry = std::make_shared<prometheus::Registry>();
  GetCounter(CounterFamily(*registry, "test_http_total", "Served over HTTP."), {{"a", "b"}}).Increment(5);
  std::atomic<int> scrapes{0};
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
      MetricsHttpServer::Start("127.0.0.1", 0, registry, [&] {
        ++scrapes;
        GetGauge(GaugeFamily(*registry, "test_refreshed", "Set on scrape."), {}).Set(scrapes.load());
      });
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);

  absl::StatusOr<HttpResponse> response = HttpGet("127.0.0.1", port, "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status_code, 200);
  EXPECT_THAT(response->body, HasSubstr("test_http_total{a=\"b\"} 5"));
  EXPECT_THAT(response->body, HasSubstr("test_refreshed 1"));  // the hook ran before collection
  EXPECT_EQ(scrapes.load(), 1);

  // The same port cannot be bound twice.
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> clash = MetricsHttpServer::Start("127.0.0.1", port, registry);
  EXPECT_EQ(clash.status().code(), absl::StatusCode::kUnavailable) << clash.status();
}

TEST(MetricsTest, BadPortIsInvalidArgument) {
  EXPECT_EQ(MetricsHttpServer::Start("127.0.0.1", 70000).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(MetricsTest, JoinHostPortBracketsIpv6) {
  EXPECT_EQ(JoinHostPort("127.0.0.1", 80), "127.0.0.1:80");
  EXPECT_EQ(JoinHostPort("::1", 80), "[::1]:80");
  EXPECT_EQ(JoinHostPort("[::]", 80), "[::]:80");
}

TEST(MetricsTest, GpuMemoryGauges) {
  prometheus::Registry registry;
  UpdateGpuMemoryMetrics(registry);
  const std::string text = SerializeMetrics(registry);
  if (DeviceRegistry::Get().cuda_available()) {
    EXPECT_THAT(text, HasSubstr("tessera_gpu_memory_total_bytes{gpu=\"0\"}"));
    EXPECT_THAT(text, HasSubstr("tessera_device_memory_peak_bytes{gpu=\"0\"}"));
    absl::StatusOr<GpuMemoryInfo> info = QueryGpuMemory(0);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_GT(info->total_bytes, 0u);
    EXPECT_LE(info->free_bytes, info->total_bytes);
  } else {
    EXPECT_THAT(text, Not(HasSubstr("gpu=\"")));
    EXPECT_EQ(QueryGpuMemory(0).status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

}  // namespace
}  // namespace tessera
