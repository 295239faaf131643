#include "services/server/trace_interceptor.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <optional>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/trace_context.h"
#include "services/server/auth.h"

namespace tessera {
namespace {

using grpc::experimental::InterceptionHookPoints;
namespace pb = google::protobuf;

// A message's top-level string field "job_id" ("" when none).
std::string JobIdOf(const void* message) {
  if (message == nullptr) return "";
  // Sync handlers' messages are generated protobuf messages (single inheritance from Message).
  const auto* m = static_cast<const pb::Message*>(message);
  const pb::FieldDescriptor* f = m->GetDescriptor()->FindFieldByName("job_id");
  if (f == nullptr || f->type() != pb::FieldDescriptor::TYPE_STRING || f->is_repeated()) return "";
  return m->GetReflection()->GetString(*m, f).substr(0, 256);
}

class ServerTraceInterceptor : public grpc::experimental::Interceptor {
 public:
  ServerTraceInterceptor(const SpanSink* sink, grpc::experimental::ServerRpcInfo* info)
      : sink_(sink), context_(info->server_context()), method_(info->method() != nullptr ? info->method() : "") {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      start_ = absl::Now();
      std::optional<TraceContext> parent;
      const auto* metadata = methods->GetRecvInitialMetadata();
      if (metadata != nullptr) {
        auto it = metadata->find(kTraceparentHeader);
        if (it != metadata->end()) parent = ParseTraceparent(std::string(it->second.data(), it->second.size()));
      }
      if (parent.has_value()) {
        parent_span_ = parent->span_id;
        trace_ = ChildSpan(*parent);
      } else {
        trace_ = NewTrace();
      }
      ExchangeCurrentTrace(trace_);
      current_ = true;
    }
    if (sink_ != nullptr && job_id_.empty() &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      job_id_ = JobIdOf(methods->GetRecvMessage());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA) && current_) {
      methods->GetSendInitialMetadata()->insert({kTraceparentHeader, FormatTraceparent(trace_)});
    }
    if (sink_ != nullptr && job_id_.empty() &&
        methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      job_id_ = JobIdOf(methods->GetSendMessage());
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) && current_) {
      if (sink_ != nullptr) {
        const grpc::Status status = methods->GetSendStatus();
        ServerSpan span;
        span.name = method_;
        span.trace_id = trace_.trace_id;
        span.span_id = trace_.span_id;
        span.parent_span_id = parent_span_;
        span.start_unix_nanos = absl::ToUnixNanos(start_);
        span.end_unix_nanos = absl::ToUnixNanos(absl::Now());
        span.status_code = status.error_code();
        span.status_message = status.error_message().substr(0, 200);
        span.principal = CallPrincipal(context_);
        span.peer = context_->peer();
        span.job_id = job_id_;
        (*sink_)(std::move(span));
      }
      // One line per call at DEBUG (TESSERA_LOG_LEVEL=DEBUG): every hop of a trace shows in its
      // process's log, trace_id first.
      TESSERA_LOG(DEBUG) << "call " << method_ << " "
                         << absl::StatusCodeToString(static_cast<absl::StatusCode>(methods->GetSendStatus().error_code()))
                         << " in " << absl::ToDoubleMilliseconds(absl::Now() - start_) << " ms";
      // The handler is done with this thread; the status is sent from it.
      if (CurrentTraceId() == trace_.trace_id) ExchangeCurrentTrace(std::nullopt);
      current_ = false;
    }
    methods->Proceed();
  }

 private:
  const SpanSink* sink_;
  grpc::ServerContextBase* context_;
  const std::string method_;
  TraceContext trace_;
  std::string parent_span_;
  std::string job_id_;
  absl::Time start_;
  bool current_ = false;
};

}  // namespace

grpc::experimental::Interceptor* TraceInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new ServerTraceInterceptor(sink_ ? &sink_ : nullptr, info);
}

}  // namespace tessera
