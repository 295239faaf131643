// W3C trace context at the gRPC edge (common/trace_context.h).
//
// Server side (TraceInterceptorFactory, installed on every `tessera serve` server): a call's
// `traceparent` metadata names its trace (a missing or malformed one starts a new trace: a bad
// header never fails a call); the call gets its own span id, the sender's becomes its parent.
// The call's trace is current on the handler's thread from its first hook to its status (gRPC
// 1.51's synchronous server runs a call's receive hooks and its handler on one thread; the
// status is sent from the handler's thread), so the handler's log lines, the auth interceptor's
// CallIdentity and audit record, the job it submits and the calls it makes carry the trace id.
// The response's initial metadata echoes `traceparent` with the call's span. At DEBUG level each
// call logs one line ("call METHOD CODE in MS ms") under its trace id. With a SpanSink, each call
// ends as one ServerSpan (the OTLP exporter, otlp_exporter.h).
//
// Client side: CreateBearerChannel (bearer_channel.h) sends it on.
#ifndef TESSERA_SERVICES_SERVER_TRACE_INTERCEPTOR_H_
#define TESSERA_SERVICES_SERVER_TRACE_INTERCEPTOR_H_

#include <cstdint>
#include <functional>
#include <string>

#include <grpcpp/support/server_interceptor.h>

namespace tessera {

// One finished server call.
struct ServerSpan {
  std::string name;  // the full method, "/tessera.v1.SchedulerService/Submit"
  std::string trace_id, span_id, parent_span_id;  // parent "" when the call started the trace
  int64_t start_unix_nanos = 0;
  int64_t end_unix_nanos = 0;
  int status_code = 0;  // gRPC code
  std::string status_message;
  std::string principal;  // "" when auth is off
  std::string peer;
  std::string job_id;  // the request's or the response's job_id field, when it has one
};

// Receives finished spans; must not block (it runs before the status is sent).
using SpanSink = std::function<void(ServerSpan)>;

class TraceInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit TraceInterceptorFactory(SpanSink sink = nullptr) : sink_(std::move(sink)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;

 private:
  const SpanSink sink_;
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_TRACE_INTERCEPTOR_H_
