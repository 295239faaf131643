#include "services/gateway/job_routes.h"

#include <cstdint>

#include "absl/strings/numbers.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "services/gateway/http_exchange.h"
#include "services/gateway/rpc_route.h"
#include "services/gateway/server_stream_sse.h"
#include "tessera/v1/common.pb.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::gateway {
namespace pb = google::protobuf;
namespace {

constexpr char kScheduler[] = "tessera.v1.SchedulerService";

// A non-negative integer query parameter (absent: 0). false after answering 400.
bool IntParam(const httplib::Request& request, httplib::Response& response, const std::string& name,
              int64_t* value) {
  *value = 0;
  if (!request.has_param(name)) return true;
  if (!absl::SimpleAtoi(request.get_param_value(name), value) || *value < 0) {
    SendError(response, grpc::StatusCode::INVALID_ARGUMENT,
              absl::StrCat("query parameter ", name, " must be a non-negative integer, got '",
                           request.get_param_value(name), "'"));
    return false;
  }
  return true;
}

const pb::MethodDescriptor* SchedulerMethod(const GatewayContext& gateway, httplib::Response& response,
                                            const char* name) {
  absl::StatusOr<const pb::MethodDescriptor*> method = gateway.forwarder.FindMethod(kScheduler, name);
  if (!method.ok()) {
    SendError(response, grpc::StatusCode::UNIMPLEMENTED,
              absl::StrCat("this server hosts no ", kScheduler, " (tessera serve --role all or scheduler does)"));
    return nullptr;
  }
  return *method;
}

// Range: bytes=N- or bytes=N-M (one range). false after answering 416.
bool ParseRange(const httplib::Request& request, httplib::Response& response, int64_t* first, int64_t* last) {
  *first = 0;
  *last = -1;
  if (!request.has_header("Range")) return true;
  const std::string range = request.get_header_value("Range");
  absl::string_view spec = range;
  bool ok = absl::ConsumePrefix(&spec, "bytes=");
  const size_t dash = spec.find('-');
  ok = ok && dash != absl::string_view::npos && dash > 0 && spec.find(',') == absl::string_view::npos &&
       absl::SimpleAtoi(spec.substr(0, dash), first) && *first >= 0;
  if (ok && dash + 1 < spec.size()) ok = absl::SimpleAtoi(spec.substr(dash + 1), last) && *last >= *first;
  if (!ok) {
    SendError(response, grpc::StatusCode::OUT_OF_RANGE,
              absl::StrCat("Range '", range, "' is not one range of the form bytes=N- or bytes=N-M"), 416);
    return false;
  }
  return true;
}

// A download in progress between the handler and httplib's content provider calls.
struct Download {
  ActiveCalls* active = nullptr;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReader<pb::Message>> reader;
  v1::FileChunk chunk;
  bool chunk_pending = false;
  bool finished = false;
  int64_t remaining = 0;  // bytes still to send
  ~Download() {
    if (reader != nullptr && !finished) {
      context->TryCancel();
      reader->Finish().ok();  // reap the cancelled call
    }
    active->Remove(context.get());
  }
};

}  // namespace

void ServeJobEvents(const GatewayContext& gateway, const std::string& job_id, const httplib::Request& request,
                    httplib::Response& response) {
  const pb::MethodDescriptor* watch = SchedulerMethod(gateway, response, "Watch");
  if (watch == nullptr) return;
  int64_t after = 0;
  if (!IntParam(request, response, "after_sequence", &after)) return;
  if (request.has_header("Last-Event-ID")) {  // an EventSource reconnecting: resume after its last event
    const std::string last = request.get_header_value("Last-Event-ID");
    if (!absl::SimpleAtoi(last, &after) || after < 0) {
      SendError(response, grpc::StatusCode::INVALID_ARGUMENT,
                absl::StrCat("Last-Event-ID must be an event sequence number, got '", last, "'"));
      return;
    }
  }
  v1::WatchJobRequest watch_request;
  watch_request.set_job_id(job_id);
  watch_request.set_after_sequence(after);
  AnswerAsEventStream(gateway.forwarder, gateway.active, *watch, CallerOf(request), watch_request, response);
}

void ServeJobFile(const GatewayContext& gateway, const std::string& job_id, const std::string& name,
                  const httplib::Request& request, httplib::Response& response) {
  const pb::MethodDescriptor* method = SchedulerMethod(gateway, response, "DownloadFile");
  if (method == nullptr) return;
  int64_t first = 0, last = -1;
  if (!ParseRange(request, response, &first, &last)) return;
  v1::DownloadJobFileRequest download_request;
  download_request.set_job_id(job_id);
  download_request.set_name(name);
  download_request.set_offset(first);
  auto download = std::make_shared<Download>();
  download->active = &gateway.active;
  download->context = RpcForwarder::NewContext(CallerOf(request));
  gateway.active.Add(download->context.get());
  download->reader = gateway.forwarder.ServerStream(*method, download->context.get(), download_request);
  download->chunk_pending = download->reader->Read(&download->chunk);
  if (!download->chunk_pending) {
    CallOutcome outcome = RpcForwarder::Finish(*download->reader, *download->context);
    download->finished = true;
    if (outcome.status.ok()) {  // a stream must name the file in its first chunk
      outcome.status = grpc::Status(grpc::StatusCode::INTERNAL, "DownloadFile answered no chunk");
    }
    if (outcome.status.error_code() == grpc::StatusCode::OUT_OF_RANGE) {
      SendError(response, outcome.status.error_code(), outcome.status.error_message(), 416);
    } else {
      SendError(response, outcome);
    }
    return;
  }
  const int64_t total = download->chunk.total_bytes();
  if (last >= total) last = total - 1;
  const int64_t end = last >= 0 ? last + 1 : total;  // exclusive
  download->remaining = end - first;
  if (request.has_header("Range")) {
    // httplib applies a request's Range to a response with a content provider only when it
    // knows the whole length; we stream from the offset ourselves, so announce the slice.
    response.status = 206;
    response.set_header("Content-Range", absl::StrCat("bytes ", first, "-", end - 1, "/", total));
  }
  response.set_header("Accept-Ranges", "bytes");
  const std::string base = name.substr(name.rfind('/') + 1);
  response.set_header("Content-Disposition", absl::StrCat("attachment; filename=\"", base, "\""));
  response.set_content_provider(
      static_cast<size_t>(download->remaining), "application/octet-stream",
      [download](size_t, size_t, httplib::DataSink& sink) {
        if (!download->chunk_pending) download->chunk_pending = download->reader->Read(&download->chunk);
        if (!download->chunk_pending) {
          const CallOutcome outcome = RpcForwarder::Finish(*download->reader, *download->context);
          download->finished = true;
          return false;  // ended before Content-Length bytes (or failed): the client sees a short body
        }
        download->chunk_pending = false;
        const std::string& data = download->chunk.data();
        const size_t n = static_cast<size_t>(std::min<int64_t>(download->remaining, data.size()));
        download->remaining -= n;
        return n == 0 || sink.write(data.data(), n);
      });
}

void ServeJobPreview(const GatewayContext& gateway, const std::string& job_id, const httplib::Request& request,
                     httplib::Response& response) {
  const pb::MethodDescriptor* method = SchedulerMethod(gateway, response, "GetPreview");
  if (method == nullptr) return;
  int64_t max_edge = 0;
  if (!IntParam(request, response, "max_edge", &max_edge)) return;
  v1::JobPreviewRequest preview_request;
  preview_request.set_job_id(job_id);
  preview_request.set_name(request.get_param_value("name"));
  preview_request.set_max_edge(static_cast<int32_t>(std::min<int64_t>(max_edge, INT32_MAX)));
  std::unique_ptr<grpc::ClientContext> context = RpcForwarder::NewContext(CallerOf(request));
  ScopedActiveCall registered(gateway.active, context.get());
  v1::JobPreview preview;
  const CallOutcome outcome = gateway.forwarder.Unary(*method, context.get(), preview_request, &preview);
  if (!outcome.status.ok()) {
    SendError(response, outcome);
    return;
  }
  response.set_header("Cache-Control", "private, max-age=60");  // a finished job's result does not change
  response.set_content(preview.png(), "image/png");
}

}  // namespace tessera::gateway

