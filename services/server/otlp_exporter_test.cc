// The OTLP/JSON exporter against a local HTTP collector: spans arrive batched in the OTLP
// structure with their ids, times, status and attributes; a full queue drops (counted) instead
// of blocking the caller; a collector's error counts as a failed POST; bad endpoints are refused.
#include "services/server/otlp_exporter.h"

#include <httplib.h>

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace tessera {
namespace {

// A collector on a free local port that keeps each POSTed body.
class Collector {
 public:
  explicit Collector(int status = 200, absl::Duration delay = absl::ZeroDuration()) {
    server_.Post("/v1/traces", [this, status, delay](const httplib::Request& req, httplib::Response& res) {
      absl::SleepFor(delay);
      {
        std::lock_guard<std::mutex> lock(mu_);
        bodies_.push_back(req.body);
        content_types_.push_back(req.get_header_value("Content-Type"));
      }
      res.status = status;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~Collector() {
    server_.stop();
    thread_.join();
  }
  std::string endpoint() const { return absl::StrCat("http://127.0.0.1:", port_, "/v1/traces"); }
  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  std::vector<std::string> content_types() {
    std::lock_guard<std::mutex> lock(mu_);
    return content_types_;
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> bodies_, content_types_;
};

ServerSpan Span(int i, int code = 0) {
  ServerSpan s;
  s.name = "/tessera.v1.SchedulerService/Submit";
  s.trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  s.span_id = absl::StrCat("00f067aa0ba902", i < 10 ? "0" : "", i);
  s.parent_span_id = i == 0 ? "" : "b7ad6b7169203331";
  s.start_unix_nanos = int64_t{1700000000000000000} + i;
  s.end_unix_nanos = s.start_unix_nanos + 1000;
  s.status_code = code;
  s.status_message = code ? "no such job" : "";
  s.principal = "ada";
  s.peer = "ipv4:127.0.0.1:5000";
  s.job_id = absl::StrCat("job-", i);
  return s;
}

TEST(OtlpExporterTest, SpansArriveAsOtlpJson) {
  Collector collector;
  OtlpExporterOptions options;
  options.endpoint = collector.endpoint();
  options.max_batch = 3;
  options.flush_interval = absl::Milliseconds(50);
  {
    auto exporter = OtlpExporter::Start(options);
    ASSERT_TRUE(exporter.ok()) << exporter.status();
    for (int i = 0; i < 7; ++i) (*exporter)->Add(Span(i, i == 6 ? 5 : 0));
  }  // the destructor sends what is left
  std::vector<nlohmann::json> spans;
  for (const std::string& body : collector.bodies()) {
    const nlohmann::json doc = nlohmann::json::parse(body);
    EXPECT_EQ(doc["resourceSpans"][0]["resource"]["attributes"][0]["key"], "service.name");
    EXPECT_EQ(doc["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"], "tessera");
    const nlohmann::json& batch = doc["resourceSpans"][0]["scopeSpans"][0]["spans"];
    EXPECT_LE(batch.size(), 3u);
    for (const auto& s : batch) spans.push_back(s);
  }
  EXPECT_EQ(collector.content_types().front(), "application/json");
  ASSERT_EQ(spans.size(), 7u);
  EXPECT_EQ(spans[0]["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(spans[0]["spanId"], "00f067aa0ba90200");
  EXPECT_FALSE(spans[0].contains("parentSpanId"));
  EXPECT_EQ(spans[1]["parentSpanId"], "b7ad6b7169203331");
  EXPECT_EQ(spans[1]["name"], "/tessera.v1.SchedulerService/Submit");
  EXPECT_EQ(spans[1]["kind"], 2);
  EXPECT_EQ(spans[1]["startTimeUnixNano"], "1700000000000000001");
  EXPECT_EQ(spans[1]["endTimeUnixNano"], "1700000000000001001");
  EXPECT_TRUE(spans[1]["status"].empty());
  EXPECT_EQ(spans[6]["status"]["code"], 2);
  EXPECT_EQ(spans[6]["status"]["message"], "no such job");
  std::map<std::string, nlohmann::json> attributes;
  for (const auto& a : spans[1]["attributes"]) attributes[a["key"]] = a["value"];
  EXPECT_EQ(attributes["rpc.system"]["stringValue"], "grpc");
  EXPECT_EQ(attributes["rpc.service"]["stringValue"], "tessera.v1.SchedulerService");
  EXPECT_EQ(attributes["rpc.method"]["stringValue"], "Submit");
  EXPECT_EQ(attributes["rpc.grpc.status_code"]["intValue"], "0");
  EXPECT_EQ(attributes["enduser.id"]["stringValue"], "ada");
  EXPECT_EQ(attributes["tessera.job_id"]["stringValue"], "job-1");
}

TEST(OtlpExporterTest, AFullQueueDropsWithoutBlocking) {
  Collector slow(200, absl::Milliseconds(300));
  OtlpExporterOptions options;
  options.endpoint = slow.endpoint();
  options.max_queue = 4;
  options.max_batch = 2;
  options.flush_interval = absl::Milliseconds(10);
  auto exporter = OtlpExporter::Start(options);
  ASSERT_TRUE(exporter.ok());
  const absl::Time start = absl::Now();
  for (int i = 0; i < 100; ++i) (*exporter)->Add(Span(i % 50));
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(100));  // the collector takes 300 ms a POST
  EXPECT_GE((*exporter)->dropped(), 90);
  exporter->reset();
}

TEST(OtlpExporterTest, CollectorErrorsAndUnreachableCollectorsCountAsFailedPosts) {
  Collector failing(500);
  OtlpExporterOptions options;
  options.endpoint = failing.endpoint();
  options.flush_interval = absl::Milliseconds(10);
  options.post_timeout = absl::Seconds(2);
  auto exporter = OtlpExporter::Start(options);
  ASSERT_TRUE(exporter.ok());
  (*exporter)->Add(Span(1));
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while ((*exporter)->failed_posts() == 0 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ((*exporter)->failed_posts(), 1);
  EXPECT_EQ((*exporter)->exported(), 0);
  EXPECT_EQ((*exporter)->dropped(), 1);
}

TEST(OtlpExporterTest, BadEndpointsAreRefused) {
  for (const char* bad : {"", "collector:4318/v1/traces", "grpc://collector:4317", "http://collector:4318",
                          "http:///v1/traces"}) {
    OtlpExporterOptions options;
    options.endpoint = bad;
    absl::StatusOr<std::unique_ptr<OtlpExporter>> e = OtlpExporter::Start(options);
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    if (!e.ok()) {
      EXPECT_NE(std::string(e.status().message()).find("--otlp-endpoint"), std::string::npos) << bad;
    }
  }
}

}  // namespace
}  // namespace tessera
