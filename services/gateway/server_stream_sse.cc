#include "services/gateway/server_stream_sse.h"

#include "absl/strings/str_cat.h"
#include "services/gateway/http_error.h"
#include "services/gateway/http_exchange.h"

namespace tessera::gateway {
namespace pb = google::protobuf;
namespace {

// The state a streamed answer keeps between the handler and httplib's calls of
// its content provider (which run after the handler returned).
struct StreamingCall {
  ActiveCalls* active = nullptr;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReader<pb::Message>> reader;
  std::unique_ptr<pb::Message> message;
  bool message_pending = false;  // read but not yet written
  bool finished = false;
  ~StreamingCall() {
    if (reader != nullptr && !finished) {
      context->TryCancel();
      reader->Finish().ok();  // reap the cancelled call; its status no longer matters
    }
    active->Remove(context.get());
  }
};

}  // namespace

std::string SseEvent(const pb::Message& message) {
  std::string event;
  const pb::FieldDescriptor* sequence = message.GetDescriptor()->FindFieldByName("sequence");
  if (sequence != nullptr && sequence->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT64 && !sequence->is_repeated()) {
    absl::StrAppend(&event, "id: ", message.GetReflection()->GetInt64(message, sequence), "\n");
  }
  // Printed JSON has no newlines, so one data line carries it.
  absl::StrAppend(&event, "data: ", RpcForwarder::ToJson(message), "\n\n");
  return event;
}

std::string SseErrorEvent(const CallOutcome& outcome) {
  return absl::StrCat("event: error\ndata: ", ErrorJson(outcome.status, outcome.retry_after_ms), "\n\n");
}

void AnswerAsEventStream(const RpcForwarder& forwarder, ActiveCalls& active, const pb::MethodDescriptor& method,
                         const CallerHeaders& caller, const pb::Message& request, httplib::Response& response) {
  auto call = std::make_shared<StreamingCall>();
  call->active = &active;
  call->context = RpcForwarder::NewContext(caller);
  active.Add(call->context.get());
  call->reader = forwarder.ServerStream(method, call->context.get(), request);
  call->message = RpcForwarder::NewMessage(method.output_type());
  call->message_pending = call->reader->Read(call->message.get());
  CopyTraceparent(*call->context, response);  // initial metadata has arrived with the first message or the end
  if (!call->message_pending) {
    const CallOutcome outcome = RpcForwarder::Finish(*call->reader, *call->context);
    call->finished = true;
    if (!outcome.status.ok()) {
      SendError(response, outcome);
      return;
    }
  }
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");  // proxies: pass events on at once
  response.set_chunked_content_provider("text/event-stream", [call](size_t, httplib::DataSink& sink) {
    if (call->finished) {
      sink.done();
      return true;
    }
    if (!call->message_pending) call->message_pending = call->reader->Read(call->message.get());
    if (call->message_pending) {
      call->message_pending = false;
      const std::string event = SseEvent(*call->message);
      return sink.write(event.data(), event.size());  // false: the client left; the call is cancelled
    }
    const CallOutcome outcome = RpcForwarder::Finish(*call->reader, *call->context);
    call->finished = true;
    if (!outcome.status.ok()) {
      const std::string event = SseErrorEvent(outcome);
      if (!sink.write(event.data(), event.size())) return false;
    }
    sink.done();
    return true;
  });
}

}  // namespace tessera::gateway
