#include "services/gateway/server_stream_sse.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "services/gateway/http_error.h"
#include "services/gateway/http_exchange.h"

namespace tessera::gateway {
namespace pb = google::protobuf;
namespace {

// The state a streamed answer keeps between the handler and httplib's calls of
// its content provider (which run after the handler returned). A thread of its
// own reads the gRPC stream (blocking reads cannot wait with a timeout), handing
// over one message at a time, so the provider can send a comment line when no
// event came for kHeartbeat: a client that went away is then noticed by the
// failed write and the call cancelled, instead of holding an HTTP thread until
// the job ends.
constexpr auto kHeartbeat = std::chrono::seconds(15);

struct StreamingCall {
  ActiveCalls* active = nullptr;
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<grpc::ClientReader<pb::Message>> reader;
  const pb::Descriptor* type = nullptr;
  std::thread thread;

  std::mutex mu;
  std::condition_variable cv;
  std::unique_ptr<pb::Message> ready;  // read, not yet taken
  bool ended = false;                  // the stream finished; `outcome` holds its status
  bool abandoned = false;              // the answer is gone: drain and finish
  CallOutcome outcome;

  void ReadAll() {
    while (true) {
      std::unique_ptr<pb::Message> message = RpcForwarder::NewMessage(type);
      if (!reader->Read(message.get())) break;
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return ready == nullptr || abandoned; });
      if (!abandoned) ready = std::move(message);
      cv.notify_all();
    }
    CallOutcome finished = RpcForwarder::Finish(*reader, *context);
    std::lock_guard<std::mutex> lock(mu);
    outcome = finished;
    ended = true;
    cv.notify_all();
  }

  ~StreamingCall() {
    {
      std::lock_guard<std::mutex> lock(mu);
      abandoned = true;
      if (!ended) context->TryCancel();
      cv.notify_all();
    }
    if (thread.joinable()) thread.join();
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
  call->type = method.output_type();
  active.Add(call->context.get());
  call->reader = forwarder.ServerStream(method, call->context.get(), request);
  call->thread = std::thread([raw = call.get()] { raw->ReadAll(); });
  {
    std::unique_lock<std::mutex> lock(call->mu);
    call->cv.wait(lock, [&] { return call->ready != nullptr || call->ended; });
    if (call->ready == nullptr && !call->outcome.status.ok()) {
      const CallOutcome outcome = call->outcome;
      lock.unlock();
      CopyTraceparent(*call->context, response);
      SendError(response, outcome);
      return;
    }
  }
  CopyTraceparent(*call->context, response);  // initial metadata came with the first message or the end
  response.set_header("Cache-Control", "no-cache");
  response.set_header("X-Accel-Buffering", "no");  // proxies: pass events on at once
  response.set_chunked_content_provider("text/event-stream", [call](size_t, httplib::DataSink& sink) {
    std::unique_lock<std::mutex> lock(call->mu);
    if (!call->cv.wait_for(lock, kHeartbeat, [&] { return call->ready != nullptr || call->ended; })) {
      lock.unlock();
      static constexpr char kComment[] = ": keep-alive\n\n";
      return sink.write(kComment, sizeof(kComment) - 1);  // false: the client left; the call is cancelled
    }
    if (call->ready != nullptr) {
      std::unique_ptr<pb::Message> message = std::move(call->ready);
      call->cv.notify_all();
      lock.unlock();
      const std::string event = SseEvent(*message);
      return sink.write(event.data(), event.size());
    }
    const CallOutcome outcome = call->outcome;
    lock.unlock();
    if (!outcome.status.ok()) {
      const std::string event = SseErrorEvent(outcome);
      if (!sink.write(event.data(), event.size())) return false;
    }
    sink.done();
    return true;
  });
}

}  // namespace tessera::gateway
