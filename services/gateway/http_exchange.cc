#include "services/gateway/http_exchange.h"

#include "absl/strings/str_cat.h"
#include "services/gateway/http_error.h"

namespace tessera::gateway {

CallerHeaders CallerOf(const httplib::Request& request) {
  CallerHeaders caller;
  caller.authorization = request.get_header_value("Authorization");
  caller.traceparent = request.get_header_value("traceparent");
  caller.client_address = request.remote_addr;
  return caller;
}

void SendJson(httplib::Response& response, int http_status, const std::string& json) {
  response.status = http_status;
  response.set_content(json, "application/json");
}

void CopyTraceparent(const grpc::ClientContext& context, httplib::Response& response) {
  const auto& metadata = context.GetServerInitialMetadata();
  auto it = metadata.find("traceparent");
  if (it != metadata.end()) response.set_header("traceparent", std::string(it->second.data(), it->second.size()));
}

void SendError(httplib::Response& response, const CallOutcome& outcome) {
  if (outcome.retry_after_ms >= 0) {
    response.set_header("Retry-After", std::to_string(RetryAfterSeconds(outcome.retry_after_ms)));
  }
  SendJson(response, HttpStatusOf(outcome.status.error_code()), ErrorJson(outcome.status, outcome.retry_after_ms));
}

void SendError(httplib::Response& response, grpc::StatusCode code, const std::string& message, int http_status) {
  const grpc::Status status(code, message);
  SendJson(response, http_status != 0 ? http_status : HttpStatusOf(code), ErrorJson(status));
}

bool ReadBoundedBody(const httplib::Request& request, httplib::Response& response,
                     const httplib::ContentReader* reader, size_t max_bytes, std::string* body) {
  body->clear();
  const auto too_large = [&] {
    response.set_header("Connection", "close");
    SendError(response, grpc::StatusCode::RESOURCE_EXHAUSTED,
              absl::StrCat("request body is larger than the server's limit of ", max_bytes,
                           " bytes (tessera serve --max-message-mb)"),
              413);
    return false;
  };
  if (request.get_header_value<uint64_t>("Content-Length") > max_bytes) return too_large();
  const bool has_body = request.has_header("Content-Length") || request.has_header("Transfer-Encoding");
  if (reader == nullptr || !has_body) return true;  // no body: the empty message
  bool over = false;
  const bool read = (*reader)([&](const char* data, size_t n) {
    if (body->size() + n > max_bytes) {
      over = true;
      return false;
    }
    body->append(data, n);
    return true;
  });
  if (over) return too_large();
  if (!read) {
    response.set_header("Connection", "close");
    SendError(response, grpc::StatusCode::INVALID_ARGUMENT, "the request body could not be read (connection broken?)");
    return false;
  }
  return true;
}

}  // namespace tessera::gateway
