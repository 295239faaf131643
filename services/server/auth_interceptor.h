// Authentication, authorization and the audit trail at the gRPC edge.
//
// AuthAuditInterceptorFactory (gRPC's experimental server interceptor API) runs for every call:
//   - POST_RECV_INITIAL_METADATA: checks "authorization: Bearer TOKEN" and the method's role
//     (auth.h) and records the decision and the caller's identity in CallRegistry.
//   - POST_RECV_MESSAGE: the first request's gallery (RequestGallery) is authorized for the
//     caller (CheckGalleryAccess): the one place per-gallery access is decided; a refusal
//     replaces the call's decision in CallRegistry.
//   - POST_RECV_MESSAGE / PRE_SEND_MESSAGE: collects the ids in requests and responses and the
//     (id, score) candidates of search answers for the audit record.
//   - PRE_SEND_STATUS: appends the audit record and fsyncs it, then lets the status go. For unary
//     calls the response message and the status leave in one batch whose interceptors all run
//     before any of it is sent, so a search answer never reaches the client before its audit
//     record is durable. If the record cannot be written the call fails UNAVAILABLE instead.
// gRPC 1.51's server interceptors cannot end a call before its handler runs, so the refusal
// itself is enforced by InstallAuthGate(): it wraps each method handler of a hosted service and
// answers refused calls with the interceptor's status without running the handler. A unary
// request is received before its handler runs, so a gallery refusal is enforced there too; a
// client stream's first message arrives after its handler started, so streaming handlers that
// take a gallery check CallDecision (auth.h) after their first Read.
// grpc.health.v1, reflection and channelz are neither checked nor audited.
#ifndef TESSERA_SERVICES_SERVER_AUTH_INTERCEPTOR_H_
#define TESSERA_SERVICES_SERVER_AUTH_INTERCEPTOR_H_

#include <memory>
#include <string>

#include <google/protobuf/message.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/server_interceptor.h>

#include "services/server/audit_log.h"
#include "services/server/auth.h"

namespace tessera {

class AuthAuditInterceptorFactory : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // authorizer null: every call allowed (principal ""); audit null: nothing recorded.
  AuthAuditInterceptorFactory(std::shared_ptr<const Authorizer> authorizer, std::shared_ptr<AuditLog> audit)
      : authorizer_(std::move(authorizer)), audit_(std::move(audit)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override;

 private:
  std::shared_ptr<const Authorizer> authorizer_;
  std::shared_ptr<AuditLog> audit_;
};

// Wraps every synchronous method handler of `service` so that a call whose CallRegistry
// decision is not OK (or missing: fail closed) is answered with that status and never reaches
// the handler. Call before the service is registered with a server; idempotent per service
// is not guaranteed: call once.
void InstallAuthGate(grpc::Service* service);

// The "details" object of an audit record for these messages: ids (string fields named id,
// *_id, ids, *_ids) of the request and of the response, and each list of (id, score)
// candidates, also inside google.protobuf.Any (job specs and results). Bounded.
std::string AuditDetailsJson(const google::protobuf::Message* request, const google::protobuf::Message* response);

// The gallery a request names: its string field "gallery" (set or not), else one found in its
// message fields or in a google.protobuf.Any they hold (a fingerprint search job's spec inside
// SubmitJobRequest). false when the request names none. What the interceptor authorizes
// (CheckGalleryAccess) and records in the audit trail.
bool RequestGallery(const google::protobuf::Message& request, std::string* gallery);

// true for grpc.health.v1, reflection and channelz methods (open for probes).
bool IsOpenMethod(absl::string_view full_method);

}  // namespace tessera

#endif  // TESSERA_SERVICES_SERVER_AUTH_INTERCEPTOR_H_
