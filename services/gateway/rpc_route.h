// POST /rpc/<package.Service>/<Method>: the request message as JSON in, the
// response as JSON out (unary), or Server-Sent Events (server streaming).
// Client-streaming methods are reached only through the upload routes.
#ifndef TESSERA_SERVICES_GATEWAY_RPC_ROUTE_H_
#define TESSERA_SERVICES_GATEWAY_RPC_ROUTE_H_

#include <google/protobuf/message.h>
#include <httplib.h>

#include "absl/strings/string_view.h"
#include "services/gateway/gateway_context.h"

namespace tessera::gateway {

void ServeRpc(const GatewayContext& gateway, absl::string_view service, absl::string_view method,
              const httplib::Request& request, httplib::Response& response, const httplib::ContentReader* body);

// Calls `method` with `message` (built by the caller: from a body, a path or
// query parameters) and answers JSON, an event stream, or the error.
void CallAndAnswer(const GatewayContext& gateway, const google::protobuf::MethodDescriptor& method,
                   const google::protobuf::Message& message, const httplib::Request& request,
                   httplib::Response& response);

}  // namespace tessera::gateway

#endif  // TESSERA_SERVICES_GATEWAY_RPC_ROUTE_H_
