// OTLP/JSON trace export (`tessera serve --otlp-endpoint http://HOST:PORT/v1/traces`): each server
// call's ServerSpan (trace_interceptor.h) is queued and a background thread POSTs them in batches
// as an OTLP ExportTraceServiceRequest in JSON (resourceSpans[].scopeSpans[].spans[]), the
// encoding every OpenTelemetry Collector and Jaeger/Tempo ingest over HTTP.
//
// Debian bookworm has no C++ OpenTelemetry SDK (apt-cache search opentelemetry lists only the Go
// one), and a span per call is all the server makes, so this small exporter over cpp-httplib's
// client stands in. It never blocks a call: Add() takes the queue's lock only to append, and a
// full queue drops the span (dropped() counts them; a rate-limited WARNING says so). A failed
// POST drops its batch (no retry: traces are best-effort; the audit trail is the record).
#ifndef TESSERA_SERVICES_SERVER_OTLP_EXPORTER_H_
#define TESSERA_SERVICES_SERVER_OTLP_EXPORTER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/server/trace_interceptor.h"

namespace tessera {

struct OtlpExporterOptions {
  std::string endpoint;  // http(s)://HOST:PORT/PATH, e.g. http://collector:4318/v1/traces
  std::string service_name = "tessera";  // the resource's service.name
  size_t max_queue = 4096;               // spans waiting; more are dropped
  size_t max_batch = 512;                // spans per POST
  absl::Duration flush_interval = absl::Seconds(2);
  absl::Duration post_timeout = absl::Seconds(5);
};

class OtlpExporter {
 public:
  // INVALID_ARGUMENT naming the endpoint when it is not http(s)://HOST[:PORT]/PATH.
  static absl::StatusOr<std::unique_ptr<OtlpExporter>> Start(OtlpExporterOptions options);
  // Sends what is queued (one last round of POSTs), then stops the thread.
  ~OtlpExporter();

  // Queues one span; never blocks on the network.
  void Add(ServerSpan span);
  // A sink for TraceInterceptorFactory (valid while this exporter lives).
  SpanSink Sink();

  int64_t exported() const { return exported_.load(); }
  int64_t dropped() const { return dropped_.load(); }
  int64_t failed_posts() const { return failed_posts_.load(); }

 private:
  OtlpExporter(OtlpExporterOptions options, std::string scheme_host_port, std::string path);
  void Run();
  void Post(const std::vector<ServerSpan>& batch);

  const OtlpExporterOptions options_;
  const std::string scheme_host_port_;
  const std::string path_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<ServerSpan> queue_;
  bool stopping_ = false;
  std::atomic<int64_t> exported_{0};
  std::atomic<int64_t> dropped_{0};
  std::atomic<int64_t> failed_posts_{0};
  std::thread thread_;
};

// The OTLP/JSON body for `spans` (ids as hex, times as decimal strings of unix nanoseconds,
// kind SERVER, status ERROR for a non-OK gRPC code).
std::string OtlpTraceJson(const std::vector<ServerSpan>& spans, const std::string& service_name);

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_OTLP_EXPORTER_H_
