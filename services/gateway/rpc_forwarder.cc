#include "services/gateway/rpc_forwarder.h"

#include <grpcpp/impl/client_unary_call.h>
#include <grpcpp/impl/rpc_method.h>
#include <google/protobuf/util/json_util.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"

namespace tessera::gateway {
namespace pb = google::protobuf;

bool IsPeerOnlyService(absl::string_view name) {
  return name == "tessera.v1.WorkerService" || name == "tessera.v1.RendezvousService";
}

std::string GrpcPath(const pb::MethodDescriptor& method) {
  return absl::StrCat("/", method.service()->full_name(), "/", method.name());
}

RpcForwarder::RpcForwarder(std::shared_ptr<grpc::Channel> channel, const std::vector<std::string>& hosted_services)
    : channel_(std::move(channel)) {
  for (const std::string& name : hosted_services) {
    if (!absl::StartsWith(name, "tessera.") || IsPeerOnlyService(name)) continue;
    const pb::ServiceDescriptor* service = pb::DescriptorPool::generated_pool()->FindServiceByName(name);
    if (service == nullptr) continue;
    services_.insert(name);
    for (int i = 0; i < service->method_count(); ++i) paths_[service->method(i)] = GrpcPath(*service->method(i));
  }
}

absl::StatusOr<const pb::MethodDescriptor*> RpcForwarder::FindMethod(absl::string_view service,
                                                                     absl::string_view method) const {
  const std::string name(service);
  if (services_.count(name) == 0) {
    return absl::NotFoundError(absl::StrCat("no service '", service, "' on this server's HTTP API"));
  }
  const pb::MethodDescriptor* m =
      pb::DescriptorPool::generated_pool()->FindServiceByName(name)->FindMethodByName(std::string(method));
  if (m == nullptr) return absl::NotFoundError(absl::StrCat("service '", service, "' has no method '", method, "'"));
  return m;
}

std::vector<const pb::MethodDescriptor*> RpcForwarder::PublicMethods() const {
  std::vector<const pb::MethodDescriptor*> out;
  for (const std::string& name : services_) {
    const pb::ServiceDescriptor* service = pb::DescriptorPool::generated_pool()->FindServiceByName(name);
    for (int i = 0; i < service->method_count(); ++i) out.push_back(service->method(i));
  }
  return out;
}

std::unique_ptr<pb::Message> RpcForwarder::NewMessage(const pb::Descriptor* type) {
  return std::unique_ptr<pb::Message>(pb::MessageFactory::generated_factory()->GetPrototype(type)->New());
}

grpc::Status RpcForwarder::ParseJson(absl::string_view json, pb::Message* message) {
  if (json.find_first_not_of(" \t\r\n") == absl::string_view::npos) return grpc::Status::OK;
  pb::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const pb::util::Status parsed = pb::util::JsonStringToMessage(pb::StringPiece(json.data(), json.size()), message,
                                                                options);
  if (!parsed.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("request body is not a valid ", message->GetDescriptor()->full_name(),
                                     " in JSON: ", std::string(parsed.message())));
  }
  return grpc::Status::OK;
}

std::string RpcForwarder::ToJson(const pb::Message& message) {
  std::string out;
  pb::util::JsonPrintOptions options;  // lowerCamelCase, enum names, defaults omitted
  const pb::util::Status printed = pb::util::MessageToJsonString(message, &out, options);
  if (!printed.ok()) return "{}";  // only for an Any of an unknown type, which the server never sends
  return out;
}

std::unique_ptr<grpc::ClientContext> RpcForwarder::NewContext(const CallerHeaders& caller) {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!caller.authorization.empty()) context->AddMetadata("authorization", caller.authorization);
  if (!caller.traceparent.empty()) context->AddMetadata("traceparent", caller.traceparent);
  if (!caller.client_address.empty()) context->AddMetadata("x-forwarded-for", caller.client_address);
  return context;
}

const std::string& RpcForwarder::PathOf(const pb::MethodDescriptor& method) const { return paths_.at(&method); }

CallOutcome RpcForwarder::Unary(const pb::MethodDescriptor& method, grpc::ClientContext* context,
                                const pb::Message& request, pb::Message* response) const {
  CallOutcome outcome;
  outcome.status = grpc::internal::BlockingUnaryCall<pb::Message, pb::Message>(
      channel_.get(), grpc::internal::RpcMethod(PathOf(method).c_str(), grpc::internal::RpcMethod::NORMAL_RPC),
      context, request, response);
  outcome.retry_after_ms = RetryPushbackMs(*context);
  return outcome;
}

std::unique_ptr<grpc::ClientReader<pb::Message>> RpcForwarder::ServerStream(const pb::MethodDescriptor& method,
                                                                           grpc::ClientContext* context,
                                                                           const pb::Message& request) const {
  return std::unique_ptr<grpc::ClientReader<pb::Message>>(grpc::internal::ClientReaderFactory<pb::Message>::Create(
      channel_.get(),
      grpc::internal::RpcMethod(PathOf(method).c_str(), grpc::internal::RpcMethod::SERVER_STREAMING), context,
      request));
}

std::unique_ptr<grpc::ClientWriter<pb::Message>> RpcForwarder::ClientStream(const pb::MethodDescriptor& method,
                                                                           grpc::ClientContext* context,
                                                                           pb::Message* response) const {
  return std::unique_ptr<grpc::ClientWriter<pb::Message>>(grpc::internal::ClientWriterFactory<pb::Message>::Create(
      channel_.get(),
      grpc::internal::RpcMethod(PathOf(method).c_str(), grpc::internal::RpcMethod::CLIENT_STREAMING), context,
      response));
}

int64_t RpcForwarder::RetryPushbackMs(const grpc::ClientContext& context) {
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find("grpc-retry-pushback-ms");
  int64_t ms = -1;
  if (it == trailers.end() || !absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()), &ms) ||
      ms < 0) {
    return -1;
  }
  return ms;
}

}  // namespace tessera::gateway
