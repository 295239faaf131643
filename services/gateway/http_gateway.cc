#include "services/gateway/http_gateway.h"

#include <signal.h>
#include <sys/socket.h>

#include <httplib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/log.h"
#include "services/gateway/embedded_files.h"
#include "services/gateway/gateway_context.h"
#include "services/gateway/http_exchange.h"
#include "services/gateway/job_routes.h"
#include "services/gateway/rpc_route.h"
#include "services/gateway/upload_route.h"

namespace tessera::gateway {
namespace pb = google::protobuf;
namespace {

std::string ContentTypeOf(absl::string_view path) {
  if (absl::EndsWith(path, ".html")) return "text/html; charset=utf-8";
  if (absl::EndsWith(path, ".js") || absl::EndsWith(path, ".mjs")) return "text/javascript; charset=utf-8";
  if (absl::EndsWith(path, ".css")) return "text/css; charset=utf-8";
  if (absl::EndsWith(path, ".json")) return "application/json";
  if (absl::EndsWith(path, ".svg")) return "image/svg+xml";
  if (absl::EndsWith(path, ".png")) return "image/png";
  if (absl::EndsWith(path, ".ico")) return "image/x-icon";
  return "application/octet-stream";
}

void ServeConsoleFile(absl::string_view file, httplib::Response& response) {
  const EmbeddedFile* f = FindEmbedded(ConsoleFiles(), file.empty() ? absl::string_view("index.html") : file);
  if (f == nullptr) {
    SendError(response, grpc::StatusCode::NOT_FOUND, absl::StrCat("no console file '", file, "'"));
    return;
  }
  // The console talks only to this origin; its token lives in sessionStorage, so no script
  // from elsewhere may run in its page.
  response.set_header("Content-Security-Policy",
                      "default-src 'self'; img-src 'self' blob: data:; style-src 'self'; frame-ancestors 'none'");
  response.set_header("X-Content-Type-Options", "nosniff");
  response.set_header("Cache-Control", "no-cache");
  response.set_content(f->data, f->size, ContentTypeOf(f->path));
}

void MethodNotAllowed(httplib::Response& response, absl::string_view path, absl::string_view allowed) {
  response.set_header("Allow", std::string(allowed));
  SendError(response, grpc::StatusCode::UNIMPLEMENTED, absl::StrCat(path, " answers ", allowed), 405);
}

}  // namespace

HttpGatewayOptions HttpGatewayOptions::For(const ServerOptions& server, int port) {
  HttpGatewayOptions o;
  o.host = server.host;
  o.port = port;
  o.tls_cert = server.tls_cert;
  o.tls_key = server.tls_key;
  o.tls_client_ca = server.tls_client_ca;
  o.max_json_bytes = static_cast<size_t>(server.max_receive_message_bytes);
  return o;
}

HttpGateway::HttpGateway(HttpGatewayOptions options, std::shared_ptr<grpc::Channel> channel,
                         const std::vector<std::string>& hosted_services)
    : options_(std::move(options)), forwarder_(std::move(channel), hosted_services) {}

HttpGateway::~HttpGateway() { Stop(); }

absl::StatusOr<int> HttpGateway::Start() {
  if (server_ != nullptr) return absl::FailedPreconditionError("the HTTP gateway is already started");
  absl::StatusOr<std::vector<RestRoute>> routes = RestRoutesOf(forwarder_.PublicMethods());
  if (!routes.ok()) return routes.status();
  rest_routes_ = *std::move(routes);
  if (!options_.tls_cert.empty()) {
    auto tls = std::make_unique<httplib::SSLServer>(
        options_.tls_cert.c_str(), options_.tls_key.c_str(),
        options_.tls_client_ca.empty() ? nullptr : options_.tls_client_ca.c_str());
    if (!tls->is_valid()) {
      return absl::InvalidArgumentError(absl::StrCat("HTTPS: cannot load ", options_.tls_cert, " / ", options_.tls_key,
                                                     options_.tls_client_ca.empty() ? "" : " / ",
                                                     options_.tls_client_ca));
    }
    server_ = std::move(tls);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  // A client that goes away mid-answer must fail that write (EPIPE), not end the process:
  // OpenSSL's writes (HTTPS) do not pass MSG_NOSIGNAL. Process-wide, as every server needs.
  signal(SIGPIPE, SIG_IGN);
  const int threads = options_.threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_tcp_nodelay(true);  // small JSON answers must not wait for Nagle
  server_->set_socket_options([](socket_t socket) {
    // SO_REUSEADDR only: without SO_REUSEPORT a second server on the port fails to bind, as gRPC's does.
    int yes = 1;
    setsockopt(socket, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  server_->set_read_timeout(absl::ToChronoSeconds(options_.read_timeout));
  server_->set_write_timeout(absl::ToChronoSeconds(options_.write_timeout));
  server_->set_keep_alive_timeout(absl::ToInt64Seconds(options_.keep_alive_timeout));
  server_->set_exception_handler([](const httplib::Request&, httplib::Response& response, std::exception_ptr) {
    SendError(response, grpc::StatusCode::INTERNAL, "the gateway failed on this request");
  });
  const auto with_body = [this](const httplib::Request& request, httplib::Response& response,
                                const httplib::ContentReader& body) { Dispatch(request, response, &body); };
  const auto without_body = [this](const httplib::Request& request, httplib::Response& response) {
    Dispatch(request, response, nullptr);
  };
  server_->Get(".*", without_body);
  server_->Post(".*", with_body);
  server_->Put(".*", with_body);
  server_->Patch(".*", with_body);
  server_->Delete(".*", with_body);

  int port = options_.port;
  if (port == 0) {
    port = server_->bind_to_any_port(options_.host);
  } else if (!server_->bind_to_port(options_.host, port)) {
    port = -1;
  }
  if (port < 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat("HTTP gateway: cannot bind ", options_.host, ":", options_.port,
                                               " (in use, or not an address of this machine)"));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  return port;
}

void HttpGateway::Stop() {
  active_.CancelAll();
  if (server_ != nullptr) server_->stop();
  if (thread_.joinable()) thread_.join();
}

void HttpGateway::Dispatch(const httplib::Request& request, httplib::Response& response,
                           const httplib::ContentReader* body) {
  // httplib 0.11 applies a request's Range header to every response body, JSON errors
  // included. Only downloads serve ranges, and they do it themselves (job_routes.cc).
  // (The Request is httplib's own non-const object, so clearing it is defined.)
  const_cast<httplib::Request&>(request).ranges.clear();
  const GatewayContext gateway{forwarder_, active_, options_.max_json_bytes};
  const std::string& path = request.path;
  const bool get = request.method == "GET" || request.method == "HEAD";

  if (path == "/healthz") {
    SendJson(response, 200, "{\"status\":\"SERVING\"}");
    return;
  }
  if (path == "/openapi.json") {
    const EmbeddedFile* f = FindEmbedded(OpenApiFiles(), "openapi.json");
    response.set_content(f->data, f->size, "application/json");
    return;
  }
  if (path == "/console" || path == "/") {
    response.set_redirect("/console/");
    return;
  }
  if (absl::StartsWith(path, "/console/")) {
    if (!get) return MethodNotAllowed(response, path, "GET");
    ServeConsoleFile(absl::string_view(path).substr(9), response);
    return;
  }
  if (absl::StartsWith(path, "/rpc/")) {
    if (request.method != "POST") return MethodNotAllowed(response, path, "POST");
    const std::vector<absl::string_view> parts = absl::StrSplit(absl::string_view(path).substr(5), '/');
    if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
      SendError(response, grpc::StatusCode::NOT_FOUND,
                "RPC paths are /rpc/<package.Service>/<Method>, e.g. /rpc/tessera.v1.SchedulerService/List");
      return;
    }
    ServeRpc(gateway, parts[0], parts[1], request, response, body);
    return;
  }
  if (absl::StartsWith(path, "/v1/jobs/")) {
    const std::vector<std::string> parts = absl::StrSplit(absl::string_view(path).substr(9), '/');
    if (parts.size() >= 2 && !parts[0].empty()) {
      const bool events = parts.size() == 2 && parts[1] == "events";
      const bool preview = parts.size() == 2 && parts[1] == "preview.png";
      const bool file = (parts.size() == 3 || parts.size() == 4) && parts[1] == "files" && !parts[2].empty() &&
                        (parts.size() == 3 || !parts[3].empty());
      if ((events || preview || file) && !get) return MethodNotAllowed(response, path, "GET");
      if (events) return ServeJobEvents(gateway, parts[0], request, response);
      if (preview) return ServeJobPreview(gateway, parts[0], request, response);
      if (file) {
        const std::string name = parts.size() == 3 ? parts[2] : absl::StrCat(parts[2], "/", parts[3]);
        return ServeJobFile(gateway, parts[0], name, request, response);
      }
    }
  }
  if (absl::StartsWith(path, "/v1/uploads/")) {
    if (request.method != "PUT") return MethodNotAllowed(response, path, "PUT");
    ServeUpload(gateway, path.substr(12), request, response, body);
    return;
  }
  std::vector<std::pair<std::string, std::string>> variables;
  const RestRoute* route =
      MatchRestRoute(rest_routes_, request.method == "HEAD" ? "GET" : request.method, path, &variables);
  if (route != nullptr) {
    ServeRest(*route, variables, request, response, body);
    return;
  }
  SendError(response, grpc::StatusCode::NOT_FOUND,
            absl::StrCat("no route ", request.method, " ", path, " (see /openapi.json)"));
}

void HttpGateway::ServeRest(const RestRoute& route, const std::vector<std::pair<std::string, std::string>>& variables,
                            const httplib::Request& request, httplib::Response& response,
                            const httplib::ContentReader* body) {
  const GatewayContext gateway{forwarder_, active_, options_.max_json_bytes};
  std::unique_ptr<pb::Message> message = RpcForwarder::NewMessage(route.method->input_type());
  grpc::Status bound = grpc::Status::OK;
  if (!route.body.empty()) {
    std::string json;
    if (!ReadBoundedBody(request, response, body, options_.max_json_bytes, &json)) return;
    pb::Message* target = message.get();
    if (route.body != "*") {
      const pb::FieldDescriptor* f = target->GetDescriptor()->FindFieldByName(route.body);
      if (f == nullptr) f = target->GetDescriptor()->FindFieldByCamelcaseName(route.body);
      target = target->GetReflection()->MutableMessage(target, f);
    }
    bound = RpcForwarder::ParseJson(json, target);
  }
  if (route.body != "*") {  // query parameters set the fields the body and path do not
    for (const auto& [name, value] : request.params) {
      if (!bound.ok()) break;
      bound = SetFieldFromText(message.get(), name, value);
    }
  }
  for (const auto& [field, value] : variables) {
    if (!bound.ok()) break;
    bound = SetFieldFromText(message.get(), field, value);
  }
  if (!bound.ok()) {
    SendError(response, CallOutcome{bound, -1});
    return;
  }
  CallAndAnswer(gateway, *route.method, *message, request, response);
}

}  // namespace tessera::gateway
