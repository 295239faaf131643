#include "services/gateway/rest_routes.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tessera/v1/http.pb.h"

namespace tessera::gateway {
namespace pb = google::protobuf;
namespace {

const pb::FieldDescriptor* FieldNamed(const pb::Descriptor& type, absl::string_view name) {
  const std::string n(name);
  const pb::FieldDescriptor* f = type.FindFieldByName(n);
  return f != nullptr ? f : type.FindFieldByCamelcaseName(n);
}

// The message holding the last part of dotted `name`, and that field; null when a part is unknown.
const pb::FieldDescriptor* ResolveField(const pb::Descriptor& root, absl::string_view name) {
  const pb::Descriptor* type = &root;
  const pb::FieldDescriptor* field = nullptr;
  for (absl::string_view part : absl::StrSplit(name, '.')) {
    if (type == nullptr) return nullptr;
    field = FieldNamed(*type, part);
    if (field == nullptr) return nullptr;
    type = field->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && !field->is_repeated() ? field->message_type()
                                                                                              : nullptr;
  }
  return field;
}

absl::StatusOr<std::vector<RestRoute::Segment>> ParseTemplate(const std::string& path,
                                                              const pb::Descriptor& request) {
  if (path.empty() || path[0] != '/') return absl::InvalidArgumentError(absl::StrCat("route '", path, "' must start with /"));
  std::vector<RestRoute::Segment> segments;
  for (absl::string_view part : absl::StrSplit(absl::string_view(path).substr(1), '/')) {
    RestRoute::Segment s;
    if (!part.empty() && part[0] == '{') {
      const size_t close = part.find('}');
      if (close == absl::string_view::npos) return absl::InvalidArgumentError(absl::StrCat("route '", path, "': unclosed {"));
      s.field = std::string(part.substr(1, close - 1));
      absl::string_view rest = part.substr(close + 1);
      if (!rest.empty() && rest[0] != ':') {
        return absl::InvalidArgumentError(absl::StrCat("route '", path, "': only ':verb' may follow a variable"));
      }
      s.verb = std::string(rest);
      const pb::FieldDescriptor* f = ResolveField(request, s.field);
      if (f == nullptr || f->is_repeated() || f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
        return absl::InvalidArgumentError(
            absl::StrCat("route '", path, "': ", request.full_name(), " has no scalar field '", s.field, "'"));
      }
    } else {
      if (part.empty() || part.find_first_of("{}") != absl::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("route '", path, "': bad segment '", part, "'"));
      }
      s.literal = std::string(part);
    }
    segments.push_back(std::move(s));
  }
  return segments;
}

}  // namespace

absl::StatusOr<std::vector<RestRoute>> RestRoutesOf(const std::vector<const pb::MethodDescriptor*>& methods) {
  std::vector<RestRoute> routes;
  for (const pb::MethodDescriptor* method : methods) {
    if (!method->options().HasExtension(v1::http)) continue;
    const v1::HttpRule& rule = method->options().GetExtension(v1::http);
    RestRoute route;
    route.method = method;
    route.body = rule.body();
    switch (rule.pattern_case()) {
      case v1::HttpRule::kGet: route.http_method = "GET"; route.path = rule.get(); break;
      case v1::HttpRule::kPut: route.http_method = "PUT"; route.path = rule.put(); break;
      case v1::HttpRule::kPost: route.http_method = "POST"; route.path = rule.post(); break;
      case v1::HttpRule::kDelete: route.http_method = "DELETE"; route.path = rule.delete_(); break;
      case v1::HttpRule::kPatch: route.http_method = "PATCH"; route.path = rule.patch(); break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(method->full_name(), ": (tessera.v1.http) names no path"));
    }
    if (method->client_streaming()) {
      return absl::InvalidArgumentError(absl::StrCat(method->full_name(), ": client streaming has no REST route"));
    }
    absl::StatusOr<std::vector<RestRoute::Segment>> segments = ParseTemplate(route.path, *method->input_type());
    if (!segments.ok()) return absl::InvalidArgumentError(absl::StrCat(method->full_name(), ": ", segments.status().message()));
    route.segments = *std::move(segments);
    if (!route.body.empty() && route.body != "*") {
      const pb::FieldDescriptor* f = FieldNamed(*method->input_type(), route.body);
      if (f == nullptr || f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || f->is_repeated()) {
        return absl::InvalidArgumentError(
            absl::StrCat(method->full_name(), ": body '", route.body, "' is not a message field of the request"));
      }
    }
    routes.push_back(std::move(route));
  }
  return routes;
}

const RestRoute* MatchRestRoute(const std::vector<RestRoute>& routes, absl::string_view http_method,
                                absl::string_view path, std::vector<std::pair<std::string, std::string>>* variables) {
  if (path.empty() || path[0] != '/') return nullptr;
  const std::vector<absl::string_view> parts = absl::StrSplit(path.substr(1), '/');
  for (const RestRoute& route : routes) {
    if (route.http_method != http_method || route.segments.size() != parts.size()) continue;
    variables->clear();
    bool match = true;
    for (size_t i = 0; match && i < parts.size(); ++i) {
      const RestRoute::Segment& s = route.segments[i];
      if (s.field.empty()) {
        match = parts[i] == s.literal;
        continue;
      }
      absl::string_view value = parts[i];
      if (!s.verb.empty()) {
        match = value.size() > s.verb.size() && absl::EndsWith(value, s.verb);
        value.remove_suffix(s.verb.size());
      } else {
        match = !value.empty() && value.find(':') == absl::string_view::npos;  // "x:verb" is another route
      }
      if (match) variables->emplace_back(s.field, std::string(value));
    }
    if (match) return &route;
  }
  return nullptr;
}

grpc::Status SetFieldFromText(pb::Message* message, absl::string_view name, absl::string_view text) {
  const auto bad = [&](absl::string_view why) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("parameter ", name, "='", text, "': ", why));
  };
  pb::Message* target = message;
  const pb::FieldDescriptor* field = nullptr;
  const std::vector<absl::string_view> parts = absl::StrSplit(name, '.');
  for (size_t i = 0; i < parts.size(); ++i) {
    field = FieldNamed(*target->GetDescriptor(), parts[i]);
    if (field == nullptr) {
      return bad(absl::StrCat(target->GetDescriptor()->full_name(), " has no field '", parts[i], "'"));
    }
    if (i + 1 < parts.size()) {
      if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE || field->is_repeated()) {
        return bad(absl::StrCat("'", parts[i], "' is not a message field"));
      }
      target = target->GetReflection()->MutableMessage(target, field);
    }
  }
  const pb::Reflection* r = target->GetReflection();
  const bool repeated = field->is_repeated();
  const std::string s(text);
  switch (field->cpp_type()) {
    case pb::FieldDescriptor::CPPTYPE_STRING:
      if (field->type() == pb::FieldDescriptor::TYPE_BYTES) return bad("bytes fields go in a JSON body (base64)");
      repeated ? r->AddString(target, field, s) : r->SetString(target, field, s);
      return grpc::Status::OK;
    case pb::FieldDescriptor::CPPTYPE_BOOL: {
      bool v;
      if (!absl::SimpleAtob(s, &v)) return bad("expected true or false");
      repeated ? r->AddBool(target, field, v) : r->SetBool(target, field, v);
      return grpc::Status::OK;
    }
    case pb::FieldDescriptor::CPPTYPE_INT32: {
      int32_t v;
      if (!absl::SimpleAtoi(s, &v)) return bad("expected a 32-bit integer");
      repeated ? r->AddInt32(target, field, v) : r->SetInt32(target, field, v);
      return grpc::Status::OK;
    }
    case pb::FieldDescriptor::CPPTYPE_INT64: {
      int64_t v;
      if (!absl::SimpleAtoi(s, &v)) return bad("expected a 64-bit integer");
      repeated ? r->AddInt64(target, field, v) : r->SetInt64(target, field, v);
      return grpc::Status::OK;
    }
    case pb::FieldDescriptor::CPPTYPE_UINT32: {
      uint32_t v;
      if (!absl::SimpleAtoi(s, &v)) return bad("expected an unsigned 32-bit integer");
      repeated ? r->AddUInt32(target, field, v) : r->SetUInt32(target, field, v);
      return grpc::Status::OK;
    }
    case pb::FieldDescriptor::CPPTYPE_UINT64: {
      uint64_t v;
      if (!absl::SimpleAtoi(s, &v)) return bad("expected an unsigned 64-bit integer");
      repeated ? r->AddUInt64(target, field, v) : r->SetUInt64(target, field, v);
      return grpc::Status::OK;
    }
    case pb::FieldDescriptor::CPPTYPE_DOUBLE:
    case pb::FieldDescriptor::CPPTYPE_FLOAT: {
      double v;
      if (!absl::SimpleAtod(s, &v)) return bad("expected a number");
      if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_FLOAT) {
        repeated ? r->AddFloat(target, field, static_cast<float>(v)) : r->SetFloat(target, field, static_cast<float>(v));
      } else {
        repeated ? r->AddDouble(target, field, v) : r->SetDouble(target, field, v);
      }
      return grpc::Status::OK;
    }
    case pb::FieldDescriptor::CPPTYPE_ENUM: {
      const pb::EnumValueDescriptor* value = field->enum_type()->FindValueByName(s);
      int number;
      if (value == nullptr && absl::SimpleAtoi(s, &number)) value = field->enum_type()->FindValueByNumber(number);
      if (value == nullptr) return bad(absl::StrCat("not a value of ", field->enum_type()->full_name()));
      repeated ? r->AddEnum(target, field, value) : r->SetEnum(target, field, value);
      return grpc::Status::OK;
    }
    case pb::FieldDescriptor::CPPTYPE_MESSAGE:
      return bad("message fields go in a JSON body");
  }
  return bad("unsupported field type");
}

}  // namespace tessera::gateway
