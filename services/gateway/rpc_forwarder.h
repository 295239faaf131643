// The gateway's side of a call: finds a public method in the generated
// descriptor pool, converts JSON <-> protobuf with the proto3 JSON mapping, and
// calls the process's own gRPC server over its in-process channel, forwarding
// the HTTP caller's Authorization and traceparent headers as metadata (and the
// client's address as x-forwarded-for, which the audit records as the peer).
// The gRPC auth interceptor and audit trail so decide and record an HTTP call
// exactly as a gRPC one.
//
// Calls use gRPC's blocking client calls on serialized messages (the same
// internal factories generated stubs use, with google::protobuf::Message in
// place of a generated type): every HTTP request has its own server thread, so
// blocking is what the handler wants, and no completion queue is needed.
#ifndef TESSERA_SERVICES_GATEWAY_RPC_FORWARDER_H_
#define TESSERA_SERVICES_GATEWAY_RPC_FORWARDER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/channel.h>
#include <grpcpp/client_context.h>
#include <grpcpp/support/status.h>
#include <grpcpp/impl/codegen/proto_utils.h>  // SerializationTraits for protobuf messages
#include <grpcpp/support/sync_stream.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::gateway {

// What an HTTP request passes on to the gRPC call.
struct CallerHeaders {
  std::string authorization;   // the Authorization header, verbatim
  std::string traceparent;     // W3C trace context, verbatim
  std::string client_address;  // the HTTP client's IP address
};

// The end of a call: its status and the server's retry hint (trailer
// grpc-retry-pushback-ms; -1 when absent).
struct CallOutcome {
  grpc::Status status;
  int64_t retry_after_ms = -1;
};

// Services reachable through the gateway are the hosted tessera.* services
// except these, which serve peer processes (a scheduler's workers, a
// distributed job's ranks), not clients.
bool IsPeerOnlyService(absl::string_view full_service_name);

class RpcForwarder {
 public:
  // `hosted_services`: full names of the services the gRPC server hosts.
  RpcForwarder(std::shared_ptr<grpc::Channel> channel, const std::vector<std::string>& hosted_services);

  // A public method by its service's full name and method name: NOT_FOUND
  // naming what is unknown (or not public).
  absl::StatusOr<const google::protobuf::MethodDescriptor*> FindMethod(absl::string_view service,
                                                                       absl::string_view method) const;
  // Every public method, in service then declaration order.
  std::vector<const google::protobuf::MethodDescriptor*> PublicMethods() const;

  // A new empty message of `type` (generated factory).
  static std::unique_ptr<google::protobuf::Message> NewMessage(const google::protobuf::Descriptor* type);
  // Merges JSON into `message` (unknown fields are INVALID_ARGUMENT naming
  // them; an empty body is the empty message).
  static grpc::Status ParseJson(absl::string_view json, google::protobuf::Message* message);
  // lowerCamelCase, enums as names, int64 as strings, defaults omitted.
  static std::string ToJson(const google::protobuf::Message& message);

  // A client context carrying `caller`'s headers as metadata.
  static std::unique_ptr<grpc::ClientContext> NewContext(const CallerHeaders& caller);

  CallOutcome Unary(const google::protobuf::MethodDescriptor& method, grpc::ClientContext* context,
                    const google::protobuf::Message& request, google::protobuf::Message* response) const;

  // Server streaming: read messages, then Finish (below).
  std::unique_ptr<grpc::ClientReader<google::protobuf::Message>> ServerStream(
      const google::protobuf::MethodDescriptor& method, grpc::ClientContext* context,
      const google::protobuf::Message& request) const;
  // Client streaming: write messages, WritesDone, then Finish (below).
  std::unique_ptr<grpc::ClientWriter<google::protobuf::Message>> ClientStream(
      const google::protobuf::MethodDescriptor& method, grpc::ClientContext* context,
      google::protobuf::Message* response) const;
  template <typename Stream>
  static CallOutcome Finish(Stream& stream, const grpc::ClientContext& context) {
    CallOutcome outcome;
    outcome.status = stream.Finish();
    outcome.retry_after_ms = RetryPushbackMs(context);
    return outcome;
  }

  static int64_t RetryPushbackMs(const grpc::ClientContext& context);

 private:
  const std::string& PathOf(const google::protobuf::MethodDescriptor& method) const;

  std::shared_ptr<grpc::Channel> channel_;
  std::set<std::string> services_;  // public ones
  // Each public method's gRPC path: grpc::internal::RpcMethod keeps a pointer.
  std::map<const google::protobuf::MethodDescriptor*, std::string> paths_;
};

// "/tessera.v1.SchedulerService/Submit": a method's gRPC path.
std::string GrpcPath(const google::protobuf::MethodDescriptor& method);

}  // namespace tessera::gateway

#endif  // TESSERA_SERVICES_GATEWAY_RPC_FORWARDER_H_
