#include "services/server/auth_interceptor.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/method_handler.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/text_checks.h"
#include "common/trace_context.h"
#include "services/server/gallery_names.h"

// Access to two private members of gRPC 1.51 (the method handlers of a service) through the
// explicit-instantiation rule, so the gate can wrap handlers without changing the services.
namespace {
template <typename Tag, typename Tag::type M>
struct Rob {
  friend typename Tag::type get(Tag) { return M; }
};
struct ServiceMethodsTag {
  using type = std::vector<std::unique_ptr<grpc::internal::RpcServiceMethod>> grpc::Service::*;
  friend type get(ServiceMethodsTag);
};
template struct Rob<ServiceMethodsTag, &grpc::Service::methods_>;
struct MethodHandlerTag {
  using type = std::unique_ptr<grpc::internal::MethodHandler> grpc::internal::RpcServiceMethod::*;
  friend type get(MethodHandlerTag);
};
template struct Rob<MethodHandlerTag, &grpc::internal::RpcServiceMethod::handler_>;
}  // namespace

namespace tessera {
namespace {

using grpc::experimental::InterceptionHookPoints;
namespace pb = google::protobuf;

constexpr size_t kMaxDetailItems = 10000;

// Ids and candidates found in the messages of one call.
struct Details {
  std::vector<std::string> request_ids;
  std::vector<std::string> response_ids;
  std::vector<std::string> candidate_groups;  // each a JSON array of [id, score]
  std::string request_id;
  bool truncated = false;

  size_t items() const { return request_ids.size() + response_ids.size() + candidate_groups.size(); }

  std::string Json() const {
    auto arr = [](const std::vector<std::string>& v, bool quote) {
      std::vector<std::string> q;
      for (const auto& s : v) q.push_back(quote ? JsonQuote(s) : s);
      return absl::StrCat("[", absl::StrJoin(q, ","), "]");
    };
    std::vector<std::string> parts;
    if (!request_ids.empty()) parts.push_back(absl::StrCat("\"request_ids\":", arr(request_ids, true)));
    if (!response_ids.empty()) parts.push_back(absl::StrCat("\"response_ids\":", arr(response_ids, true)));
    if (!candidate_groups.empty()) parts.push_back(absl::StrCat("\"candidates\":", arr(candidate_groups, false)));
    if (truncated) parts.push_back("\"truncated\":true");
    return absl::StrCat("{", absl::StrJoin(parts, ","), "}");
  }
};

bool IsIdField(const pb::FieldDescriptor* f) {
  if (f->type() != pb::FieldDescriptor::TYPE_STRING) return false;
  const std::string& n = f->name();
  return n == "id" || n == "ids" || absl::EndsWith(n, "_id") || absl::EndsWith(n, "_ids");
}

// A message like Candidate: a string "id" and a float/double "score".
bool IsCandidate(const pb::Descriptor* d) {
  const pb::FieldDescriptor* id = d->FindFieldByName("id");
  const pb::FieldDescriptor* score = d->FindFieldByName("score");
  return id != nullptr && score != nullptr && id->type() == pb::FieldDescriptor::TYPE_STRING &&
         !id->is_repeated() &&
         (score->type() == pb::FieldDescriptor::TYPE_FLOAT || score->type() == pb::FieldDescriptor::TYPE_DOUBLE);
}

// The message inside a google.protobuf.Any of a type this process knows, or null.
std::unique_ptr<pb::Message> UnpackAny(const pb::Message& any) {
  const pb::FieldDescriptor* url = any.GetDescriptor()->FindFieldByName("type_url");
  const pb::FieldDescriptor* value = any.GetDescriptor()->FindFieldByName("value");
  if (url == nullptr || value == nullptr) return nullptr;
  const std::string type_url = any.GetReflection()->GetString(any, url);
  const pb::Descriptor* type =
      pb::DescriptorPool::generated_pool()->FindMessageTypeByName(type_url.substr(type_url.rfind('/') + 1));
  if (type == nullptr) return nullptr;
  const pb::Message* prototype = pb::MessageFactory::generated_factory()->GetPrototype(type);
  if (prototype == nullptr) return nullptr;
  std::unique_ptr<pb::Message> inner(prototype->New());
  if (!inner->ParseFromString(any.GetReflection()->GetString(any, value))) return nullptr;
  return inner;
}

void Collect(const pb::Message& m, int depth, std::vector<std::string>* ids, Details* d) {
  if (depth > 4) return;
  const pb::Reflection* r = m.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    if (d->items() >= kMaxDetailItems) {
      d->truncated = true;
      return;
    }
    if (IsIdField(f)) {
      if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f) && ids->size() < kMaxDetailItems; ++i) {
          ids->push_back(r->GetRepeatedString(m, f, i).substr(0, 256));
        }
      } else {
        ids->push_back(r->GetString(m, f).substr(0, 256));
      }
    } else if (f->type() == pb::FieldDescriptor::TYPE_MESSAGE) {
      if (!f->is_repeated() && f->message_type()->full_name() == "google.protobuf.Any") {
        // A job's spec or result (e.g. a fingerprint search job's candidates): look inside.
        std::unique_ptr<pb::Message> inner = UnpackAny(r->GetMessage(m, f));
        if (inner != nullptr) Collect(*inner, depth + 1, ids, d);
      } else if (f->is_repeated() && IsCandidate(f->message_type())) {
        const pb::FieldDescriptor* idf = f->message_type()->FindFieldByName("id");
        const pb::FieldDescriptor* sf = f->message_type()->FindFieldByName("score");
        std::vector<std::string> group;
        for (int i = 0; i < r->FieldSize(m, f); ++i) {
          const pb::Message& c = r->GetRepeatedMessage(m, f, i);
          const pb::Reflection* cr = c.GetReflection();
          const double score = sf->type() == pb::FieldDescriptor::TYPE_FLOAT ? cr->GetFloat(c, sf) : cr->GetDouble(c, sf);
          group.push_back(absl::StrCat("[", JsonQuote(cr->GetString(c, idf).substr(0, 256)), ",", score, "]"));
        }
        d->candidate_groups.push_back(absl::StrCat("[", absl::StrJoin(group, ","), "]"));
      } else if (f->is_repeated()) {
        for (int i = 0; i < r->FieldSize(m, f); ++i) Collect(r->GetRepeatedMessage(m, f, i), depth + 1, ids, d);
      } else {
        Collect(r->GetMessage(m, f), depth + 1, ids, d);
      }
    }
  }
}

// A string field named "gallery" of `m` (set or not: proto3 leaves "" unset), else of its set
// message fields and of a google.protobuf.Any they hold (a fingerprint search job's spec).
bool FindGalleryField(const pb::Message& m, int depth, std::string* out) {
  if (depth > 4) return false;
  const pb::Descriptor* d = m.GetDescriptor();
  const pb::Reflection* r = m.GetReflection();
  const pb::FieldDescriptor* g = d->FindFieldByName("gallery");
  if (g != nullptr && g->type() == pb::FieldDescriptor::TYPE_STRING && !g->is_repeated()) {
    *out = r->GetString(m, g);
    return true;
  }
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    if (f->type() != pb::FieldDescriptor::TYPE_MESSAGE || f->is_repeated()) continue;
    const pb::Message& sub = r->GetMessage(m, f);
    if (f->message_type()->full_name() == "google.protobuf.Any") {
      std::unique_ptr<pb::Message> inner = UnpackAny(sub);
      if (inner != nullptr && FindGalleryField(*inner, depth + 1, out)) return true;
    } else if (FindGalleryField(sub, depth + 1, out)) {
      return true;
    }
  }
  return false;
}

// The caller's address for the audit record. A call over the in-process channel (whose peer
// gRPC 1.51 reports as "unknown"; network peers are "ipv4:..."/"ipv6:..."/"unix:...") comes from
// this process's HTTP gateway (services/gateway/), which names its HTTP client in
// x-forwarded-for: recorded as "http:ADDRESS". Network peers' x-forwarded-for is ignored.
std::string PeerOf(const grpc::ServerContextBase& context) {
  const std::string peer = context.peer();
  if (peer != "unknown" && !absl::StartsWith(peer, "inproc")) return peer;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("x-forwarded-for");
  if (it == metadata.end()) return peer;
  return absl::StrCat("http:", absl::string_view(it->second.data(), std::min<size_t>(it->second.size(), 64)));
}

class AuthAuditInterceptor : public grpc::experimental::Interceptor {
 public:
  AuthAuditInterceptor(const Authorizer* authorizer, AuditLog* audit, grpc::experimental::ServerRpcInfo* info)
      : authorizer_(authorizer), audit_(audit), context_(info->server_context()),
        method_(info->method() != nullptr ? info->method() : "") {
    open_ = IsOpenMethod(method_);
  }

  ~AuthAuditInterceptor() override {
    if (registered_) CallRegistry::Get().Erase(context_);
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (open_) {
      methods->Proceed();
      return;
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      identity_.method = method_;
      identity_.peer = PeerOf(*context_);
      identity_.trace_id = CurrentTraceId();  // the trace interceptor's receive hook ran first
      if (authorizer_ != nullptr) decision_ = authorizer_->Check(method_, *context_, &identity_);
      CallRegistry::Get().Set(context_, identity_, decision_);
      registered_ = true;
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // Sync handlers' requests are generated protobuf messages (single inheritance from Message).
      const auto* m = static_cast<const pb::Message*>(methods->GetRecvMessage());
      if (m != nullptr && !first_message_seen_) {
        first_message_seen_ = true;
        CheckGallery(*m);
      }
      if (m != nullptr && audit_ != nullptr) {
        if (details_.request_id.empty()) {
          const pb::FieldDescriptor* f = m->GetDescriptor()->FindFieldByName("request_id");
          if (f == nullptr) f = m->GetDescriptor()->FindFieldByName("job_id");
          if (f != nullptr && f->type() == pb::FieldDescriptor::TYPE_STRING && !f->is_repeated()) {
            details_.request_id = m->GetReflection()->GetString(*m, f).substr(0, 256);
          }
        }
        Collect(*m, 0, &details_.request_ids, &details_);
      }
    }
    if (audit_ != nullptr && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      const auto* m = static_cast<const pb::Message*>(methods->GetSendMessage());
      if (m != nullptr) Collect(*m, 0, &details_.response_ids, &details_);
    }
    if (audit_ != nullptr && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      AuditEvent e;
      e.principal = identity_.principal;
      e.peer = identity_.peer.empty() ? context_->peer() : identity_.peer;
      e.method = method_;
      e.request_id = details_.request_id;
      e.gallery = gallery_;
      e.trace_id = identity_.trace_id;
      if (e.gallery.empty()) {  // a call about a job names the job's gallery (AnnotateCallGallery)
        CallIdentity now;
        CallRegistry::Get().Decision(context_, &now).IgnoreError();
        e.gallery = now.gallery;
      }
      e.outcome = absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()));
      std::string json = details_.Json();
      if (!status.ok()) {
        // The refusal's reason (never data: auth messages quote no token).
        json.pop_back();
        json = absl::StrCat(json, json.size() > 1 ? "," : "", "\"message\":",
                            JsonQuote(status.error_message().substr(0, 200)), "}");
      }
      e.details_json = std::move(json);
      absl::StatusOr<int64_t> seq = audit_->Append(e);
      if (!seq.ok()) {
        TESSERA_LOG(ERROR) << "audit record for " << method_ << " not written: " << seq.status()
                           << "; the call fails UNAVAILABLE";
        methods->ModifySendStatus(grpc::Status(grpc::StatusCode::UNAVAILABLE, "audit log unavailable"));
      }
    }
    methods->Proceed();
  }

 private:
  // The gallery a call's (first) request names, checked against the caller's grants: the one
  // place galleries are authorized. A refusal becomes the call's decision, which the gate
  // enforces before unary handlers run and streaming handlers read (CallDecision) after Read.
  void CheckGallery(const pb::Message& request) {
    std::string name;
    if (!RequestGallery(request, &name)) return;
    const absl::Status valid = CheckGalleryName(GalleryOrDefault(name));
    gallery_ = valid.ok() ? GalleryOrDefault(name) : QuoteBounded(name, 64);
    if (valid.ok()) {
      identity_.gallery = gallery_;  // what the handler reads (a job submitted here records it)
      CallRegistry::Get().Set(context_, identity_, decision_);
    }
    if (authorizer_ == nullptr || !decision_.ok()) return;
    absl::Status access = CheckGalleryAccess(identity_, method_, name);
    if (access.ok()) return;
    decision_ = std::move(access);
    CallRegistry::Get().Set(context_, identity_, decision_);
  }

  const Authorizer* authorizer_;
  AuditLog* audit_;
  grpc::ServerContextBase* context_;
  const std::string method_;
  bool open_ = false;
  bool registered_ = false;
  bool first_message_seen_ = false;
  absl::Status decision_;
  CallIdentity identity_;
  std::string gallery_;
  Details details_;
};

// Answers a refused call with its status without running the service's handler.
class GateHandler : public grpc::internal::MethodHandler {
 public:
  explicit GateHandler(std::unique_ptr<grpc::internal::MethodHandler> inner) : inner_(std::move(inner)) {}

  void RunHandler(const HandlerParameter& param) override {
    absl::Status decision = CallRegistry::Get().Decision(param.server_context);
    if (decision.ok()) {
      inner_->RunHandler(param);
      return;
    }
    if (decision.code() == absl::StatusCode::kNotFound) {
      decision = absl::PermissionDeniedError("call not checked by the auth interceptor (denied)");
    }
    // The request the inner handler deserialized (unary and server-streaming) is not used.
    if (param.request != nullptr) static_cast<pb::Message*>(param.request)->~Message();
    const grpc::Status status = ToGrpcStatus(decision);
    grpc::internal::BidiStreamingHandler<grpc::Service, grpc::ByteBuffer, grpc::ByteBuffer> refuse(
        [status](grpc::Service*, grpc::ServerContext*, grpc::ServerReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>*) {
          return status;
        },
        nullptr);
    refuse.RunHandler(HandlerParameter(param.call, param.server_context, nullptr, grpc::Status::OK, nullptr,
                                       param.call_requester));
  }

  void* Deserialize(grpc_call* call, grpc_byte_buffer* req, grpc::Status* status, void** handler_data) override {
    return inner_->Deserialize(call, req, status, handler_data);
  }

 private:
  std::unique_ptr<grpc::internal::MethodHandler> inner_;
};

}  // namespace

std::string AuditDetailsJson(const google::protobuf::Message* request, const google::protobuf::Message* response) {
  Details d;
  if (request != nullptr) Collect(*request, 0, &d.request_ids, &d);
  if (response != nullptr) Collect(*response, 0, &d.response_ids, &d);
  return d.Json();
}

bool RequestGallery(const google::protobuf::Message& request, std::string* gallery) {
  return FindGalleryField(request, 0, gallery);
}

bool IsOpenMethod(absl::string_view m) {
  return absl::StartsWith(m, "/grpc.health.v1.") || absl::StartsWith(m, "/grpc.reflection.") ||
         absl::StartsWith(m, "/grpc.channelz.");
}

grpc::experimental::Interceptor* AuthAuditInterceptorFactory::CreateServerInterceptor(
    grpc::experimental::ServerRpcInfo* info) {
  return new AuthAuditInterceptor(authorizer_.get(), audit_.get(), info);
}

void InstallAuthGate(grpc::Service* service) {
  auto& methods = service->*get(ServiceMethodsTag());
  for (auto& method : methods) {
    if (method == nullptr || method->api_type() != grpc::internal::RpcServiceMethod::ApiType::SYNC) continue;
    auto& handler = (*method).*get(MethodHandlerTag());
    if (handler == nullptr) continue;
    handler = std::make_unique<GateHandler>(std::move(handler));
  }
}

}  // namespace tessera
