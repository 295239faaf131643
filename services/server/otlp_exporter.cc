#include "services/server/otlp_exporter.h"

#include <httplib.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/json.h"
#include "common/log.h"

namespace tessera {
namespace {

std::string StringAttribute(const std::string& key, const std::string& value) {
  return absl::StrCat("{\"key\":", JsonQuote(key), ",\"value\":{\"stringValue\":", JsonQuote(value), "}}");
}

std::string IntAttribute(const std::string& key, int64_t value) {
  // OTLP/JSON writes 64-bit integers as strings.
  return absl::StrCat("{\"key\":", JsonQuote(key), ",\"value\":{\"intValue\":\"", value, "\"}}");
}

std::string SpanJson(const ServerSpan& s) {
  // "/package.Service/Method" -> rpc.service, rpc.method (OpenTelemetry's RPC conventions).
  const size_t slash = s.name.rfind('/');
  std::vector<std::string> attributes = {StringAttribute("rpc.system", "grpc")};
  if (slash != std::string::npos && slash > 0) {
    attributes.push_back(StringAttribute("rpc.service", s.name.substr(1, slash - 1)));
    attributes.push_back(StringAttribute("rpc.method", s.name.substr(slash + 1)));
  }
  attributes.push_back(IntAttribute("rpc.grpc.status_code", s.status_code));
  if (!s.principal.empty()) attributes.push_back(StringAttribute("enduser.id", s.principal));
  if (!s.peer.empty()) attributes.push_back(StringAttribute("net.peer.name", s.peer));
  if (!s.job_id.empty()) attributes.push_back(StringAttribute("tessera.job_id", s.job_id));
  std::string status = "{}";  // UNSET for OK
  if (s.status_code != 0) {
    status = absl::StrCat("{\"code\":2,\"message\":", JsonQuote(s.status_message), "}");
  }
  return absl::StrCat("{\"traceId\":\"", s.trace_id, "\",\"spanId\":\"", s.span_id, "\",",
                      s.parent_span_id.empty() ? "" : absl::StrCat("\"parentSpanId\":\"", s.parent_span_id, "\","),
                      "\"name\":", JsonQuote(s.name), ",\"kind\":2,\"startTimeUnixNano\":\"", s.start_unix_nanos,
                      "\",\"endTimeUnixNano\":\"", s.end_unix_nanos, "\",\"attributes\":[",
                      absl::StrJoin(attributes, ","), "],\"status\":", status, "}");
}

}  // namespace

std::string OtlpTraceJson(const std::vector<ServerSpan>& spans, const std::string& service_name) {
  std::vector<std::string> items;
  items.reserve(spans.size());
  for (const ServerSpan& s : spans) items.push_back(SpanJson(s));
  return absl::StrCat("{\"resourceSpans\":[{\"resource\":{\"attributes\":[", StringAttribute("service.name", service_name),
                      "]},\"scopeSpans\":[{\"scope\":{\"name\":\"tessera\"},\"spans\":[", absl::StrJoin(items, ","),
                      "]}]}]}");
}

absl::StatusOr<std::unique_ptr<OtlpExporter>> OtlpExporter::Start(OtlpExporterOptions options) {
  const std::string& url = options.endpoint;
  const bool http = absl::StartsWith(url, "http://");
  if (!http && !absl::StartsWith(url, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("--otlp-endpoint '", url, "' is not http(s)://HOST:PORT/PATH (e.g. http://collector:4318/v1/traces)"));
  }
  const size_t host_begin = http ? 7 : 8;
  const size_t path_begin = url.find('/', host_begin);
  if (path_begin == std::string::npos || path_begin == host_begin) {
    return absl::InvalidArgumentError(
        absl::StrCat("--otlp-endpoint '", url, "' needs a host and a path (OTLP/HTTP's is /v1/traces)"));
  }
  if (options.max_queue == 0 || options.max_batch == 0 || options.flush_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the OTLP exporter needs a queue, a batch size and a flush interval");
  }
  std::string scheme_host_port = url.substr(0, path_begin);
  std::string path = url.substr(path_begin);
  return std::unique_ptr<OtlpExporter>(new OtlpExporter(std::move(options), std::move(scheme_host_port), std::move(path)));
}

OtlpExporter::OtlpExporter(OtlpExporterOptions options, std::string scheme_host_port, std::string path)
    : options_(std::move(options)), scheme_host_port_(std::move(scheme_host_port)), path_(std::move(path)) {
  thread_ = std::thread([this] { Run(); });
}

OtlpExporter::~OtlpExporter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void OtlpExporter::Add(ServerSpan span) {
  bool full_batch = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_.size() >= options_.max_queue) {
      const int64_t dropped = dropped_.fetch_add(1) + 1;
      // The first drop and then every 1000th: a slow collector must not flood the log either.
      if (dropped == 1 || dropped % 1000 == 0) {
        TESSERA_LOG(WARNING) << "OTLP export: " << dropped << " span(s) dropped so far (queue of "
                             << options_.max_queue << " full; is " << options_.endpoint << " slow or down?)";
      }
      return;
    }
    queue_.push_back(std::move(span));
    full_batch = queue_.size() >= options_.max_batch;
  }
  if (full_batch) wake_.notify_one();
}

SpanSink OtlpExporter::Sink() {
  return [this](ServerSpan span) { Add(std::move(span)); };
}

void OtlpExporter::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait_for(lock, absl::ToChronoMilliseconds(options_.flush_interval),
                   [&] { return stopping_ || queue_.size() >= options_.max_batch; });
    const bool stopping = stopping_;
    while (!queue_.empty()) {
      const size_t n = std::min(queue_.size(), options_.max_batch);
      std::vector<ServerSpan> batch(std::make_move_iterator(queue_.begin()),
                                    std::make_move_iterator(queue_.begin() + static_cast<std::ptrdiff_t>(n)));
      queue_.erase(queue_.begin(), queue_.begin() + static_cast<std::ptrdiff_t>(n));
      lock.unlock();  // calls keep queueing while this batch is on the wire
      Post(batch);
      lock.lock();
      if (!stopping && queue_.size() < options_.max_batch) break;  // the rest waits for the interval
    }
    if (stopping) return;
  }
}

void OtlpExporter::Post(const std::vector<ServerSpan>& batch) {
  httplib::Client client(scheme_host_port_);
  const auto timeout = absl::ToChronoMilliseconds(options_.post_timeout);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  httplib::Result r = client.Post(path_, OtlpTraceJson(batch, options_.service_name), "application/json");
  if (r && r->status >= 200 && r->status < 300) {
    exported_.fetch_add(static_cast<int64_t>(batch.size()));
    return;
  }
  const int64_t failed = failed_posts_.fetch_add(1) + 1;
  dropped_.fetch_add(static_cast<int64_t>(batch.size()));
  if (failed == 1 || failed % 100 == 0) {
    TESSERA_LOG(WARNING) << "OTLP export to " << options_.endpoint << " failed ("
                         << (r ? absl::StrCat("HTTP ", r->status) : httplib::to_string(r.error())) << "); "
                         << batch.size() << " span(s) dropped, " << failed << " failed POST(s) so far";
  }
}

}  // namespace tessera
