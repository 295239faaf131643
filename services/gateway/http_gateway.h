// The HTTP/JSON gateway of `tessera serve --http-port`: an HTTP(S) server
// (cpp-httplib) in the serving process that forwards every call to the
// process's own gRPC server over its in-process channel, so tokens, roles,
// the audit trail, limits and trace context apply exactly as for gRPC.
//
// Routes (README.md "HTTP/JSON API" is the user's description):
//   POST /rpc/<package.Service>/<Method>    every public unary RPC (JSON in and out)
//                                           and server-streaming RPC (Server-Sent Events)
//   the (tessera.v1.http) routes of annotated RPCs (rest_routes.h)
//   GET  /v1/jobs/{job_id}/events, /files/{name}, /preview.png  (job_routes.h)
//   PUT  /v1/uploads/registration|reconstruction?filename=F     (upload_route.h)
//   GET  /openapi.json, /console/ (embedded at build time), /healthz (open)
// Errors are JSON with the gRPC code and the standard HTTP status (http_error.h).
//
//   HttpGateway gateway(HttpGatewayOptions::For(server_options, port), host.InProcessChannel(),
//                       host.service_names());
//   absl::StatusOr<int> port = gateway.Start();   // after host.Start()
//   ...
//   gateway.Stop();                               // cancels streams in flight, joins
#ifndef TESSERA_SERVICES_GATEWAY_HTTP_GATEWAY_H_
#define TESSERA_SERVICES_GATEWAY_HTTP_GATEWAY_H_

#include <cstddef>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/channel.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/gateway/active_calls.h"
#include "services/gateway/rest_routes.h"
#include "services/gateway/rpc_forwarder.h"
#include "services/server/server_options.h"

namespace httplib {
class Server;
class Request;
class Response;
class ContentReader;
}  // namespace httplib

namespace tessera::gateway {

struct HttpGatewayOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0 picks a free one
  // HTTPS when set (the gRPC server's files); with tls_client_ca, clients must
  // present a certificate signed by it. Identities still come from bearer tokens.
  std::string tls_cert, tls_key, tls_client_ca;
  size_t max_json_bytes = size_t{64} << 20;  // a JSON request body (the server's largest message)
  int threads = 64;  // HTTP requests served at once (an open event stream holds one)
  absl::Duration read_timeout = absl::Seconds(30);   // per read of a request (headers or body)
  absl::Duration write_timeout = absl::Seconds(30);  // per write to a slow client
  absl::Duration keep_alive_timeout = absl::Seconds(5);

  // The gateway of a server with `server`'s host, TLS files and message limit, on `port`.
  static HttpGatewayOptions For(const ServerOptions& server, int port);
};

class HttpGateway {
 public:
  // `hosted_services`: ServiceHost::service_names() (the gateway serves the public tessera.* ones).
  HttpGateway(HttpGatewayOptions options, std::shared_ptr<grpc::Channel> channel,
              const std::vector<std::string>& hosted_services);
  ~HttpGateway();
  HttpGateway(const HttpGateway&) = delete;
  HttpGateway& operator=(const HttpGateway&) = delete;

  // Binds and starts serving on a thread of its own; returns the bound port.
  // INVALID_ARGUMENT for a malformed route annotation or unreadable TLS files,
  // UNAVAILABLE when the port cannot be bound.
  absl::StatusOr<int> Start();
  // Cancels the gRPC calls in flight (event streams, downloads), stops
  // accepting and joins. Idempotent.
  void Stop();

 private:
  void Dispatch(const httplib::Request& request, httplib::Response& response, const httplib::ContentReader* body);
  void ServeRest(const RestRoute& route, const std::vector<std::pair<std::string, std::string>>& variables,
                 const httplib::Request& request, httplib::Response& response, const httplib::ContentReader* body);

  const HttpGatewayOptions options_;
  RpcForwarder forwarder_;
  ActiveCalls active_;
  std::vector<RestRoute> rest_routes_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace tessera::gateway

#endif  // TESSERA_SERVICES_GATEWAY_HTTP_GATEWAY_H_
