#include "services/gateway/rpc_route.h"

#include "absl/strings/str_cat.h"
#include "services/gateway/http_exchange.h"
#include "services/gateway/server_stream_sse.h"

namespace tessera::gateway {
namespace pb = google::protobuf;

void CallAndAnswer(const GatewayContext& gateway, const pb::MethodDescriptor& method, const pb::Message& message,
                   const httplib::Request& request, httplib::Response& response) {
  const CallerHeaders caller = CallerOf(request);
  if (method.server_streaming()) {
    AnswerAsEventStream(gateway.forwarder, gateway.active, method, caller, message, response);
    return;
  }
  std::unique_ptr<grpc::ClientContext> context = RpcForwarder::NewContext(caller);
  ScopedActiveCall registered(gateway.active, context.get());
  std::unique_ptr<pb::Message> answer = RpcForwarder::NewMessage(method.output_type());
  const CallOutcome outcome = gateway.forwarder.Unary(method, context.get(), message, answer.get());
  CopyTraceparent(*context, response);
  if (!outcome.status.ok()) {
    SendError(response, outcome);
    return;
  }
  SendJson(response, 200, RpcForwarder::ToJson(*answer));
}

void ServeRpc(const GatewayContext& gateway, absl::string_view service, absl::string_view method_name,
              const httplib::Request& request, httplib::Response& response, const httplib::ContentReader* body) {
  absl::StatusOr<const pb::MethodDescriptor*> method = gateway.forwarder.FindMethod(service, method_name);
  if (!method.ok()) {
    SendError(response, grpc::StatusCode::NOT_FOUND, std::string(method.status().message()));
    return;
  }
  if ((*method)->client_streaming()) {
    SendError(response, grpc::StatusCode::UNIMPLEMENTED,
              absl::StrCat((*method)->full_name(),
                           " streams its request: over HTTP, upload files with PUT /v1/uploads/registration or "
                           "/v1/uploads/reconstruction?filename=NAME"));
    return;
  }
  std::string json;
  if (!ReadBoundedBody(request, response, body, gateway.max_json_bytes, &json)) return;
  std::unique_ptr<pb::Message> message = RpcForwarder::NewMessage((*method)->input_type());
  const grpc::Status parsed = RpcForwarder::ParseJson(json, message.get());
  if (!parsed.ok()) {
    SendError(response, CallOutcome{parsed, -1});
    return;
  }
  CallAndAnswer(gateway, **method, *message, request, response);
}

}  // namespace tessera::gateway
