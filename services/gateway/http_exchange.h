// Small pieces every gateway route shares: the caller's headers for the gRPC
// call, JSON answers and errors (http_error.h), and bounded JSON bodies.
#ifndef TESSERA_SERVICES_GATEWAY_HTTP_EXCHANGE_H_
#define TESSERA_SERVICES_GATEWAY_HTTP_EXCHANGE_H_

#include <cstddef>
#include <string>

#include <httplib.h>

#include "services/gateway/rpc_forwarder.h"

namespace tessera::gateway {

// Authorization and traceparent headers and the client's address.
CallerHeaders CallerOf(const httplib::Request& request);

void SendJson(httplib::Response& response, int http_status, const std::string& json);
// The server's traceparent (its initial metadata echoes the call's trace) as a response header,
// so an HTTP client learns the trace id of a call it did not name one for.
void CopyTraceparent(const grpc::ClientContext& context, httplib::Response& response);
// A failed call: the mapped HTTP status, the JSON error body, Retry-After from the pushback trailer.
void SendError(httplib::Response& response, const CallOutcome& outcome);
// The gateway's own refusal (before any call), with the HTTP status of `code`
// unless `http_status` overrides it (411, 413, 416 have no gRPC code of their own).
void SendError(httplib::Response& response, grpc::StatusCode code, const std::string& message, int http_status = 0);

// The request body for a JSON call, at most `max_bytes`: false after answering
// 413 when it is larger (the connection is then closed: the rest is unread).
bool ReadBoundedBody(const httplib::Request& request, httplib::Response& response,
                     const httplib::ContentReader* reader, size_t max_bytes, std::string* body);

}  // namespace tessera::gateway

#endif  // TESSERA_SERVICES_GATEWAY_HTTP_EXCHANGE_H_
