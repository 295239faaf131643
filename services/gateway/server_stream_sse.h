// A server-streaming RPC answered as Server-Sent Events: one
// "data: <message JSON>" event per message (with "id: <sequence>" when the
// message has an int64 field "sequence", as JobEvent does, so EventSource's
// Last-Event-ID resumes a Watch), flushed per event; a non-OK end becomes
// "event: error" with the JSON error body. The first message is awaited before
// answering, so a call refused at once (unauthenticated, unknown job) gets its
// mapped HTTP status and JSON error instead of a 200 stream. A client that goes
// away cancels the call at the next event or heartbeat (a comment line every
// 15 s without events).
#ifndef TESSERA_SERVICES_GATEWAY_SERVER_STREAM_SSE_H_
#define TESSERA_SERVICES_GATEWAY_SERVER_STREAM_SSE_H_

#include <memory>
#include <string>

#include <google/protobuf/message.h>
#include <httplib.h>

#include "services/gateway/active_calls.h"
#include "services/gateway/rpc_forwarder.h"

namespace tessera::gateway {

// One SSE event for `message`.
std::string SseEvent(const google::protobuf::Message& message);
// The closing error event.
std::string SseErrorEvent(const CallOutcome& outcome);

void AnswerAsEventStream(const RpcForwarder& forwarder, ActiveCalls& active,
                         const google::protobuf::MethodDescriptor& method, const CallerHeaders& caller,
                         const google::protobuf::Message& request, httplib::Response& response);

}  // namespace tessera::gateway

#endif  // TESSERA_SERVICES_GATEWAY_SERVER_STREAM_SSE_H_
