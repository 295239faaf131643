// The REST routes of RPCs annotated with (tessera.v1.http) (protos/tessera/v1/http.proto),
// read from the descriptors: a path template of literal segments and {field}
// variables (a variable may end in a custom verb, "{job_id}:cancel"), bound
// into the request message; with body "*" the JSON body is the request, with a
// field name the body is that field, and without a body query parameters set
// the remaining fields (?field=value, repeated fields by repeating the parameter).
#ifndef TESSERA_SERVICES_GATEWAY_REST_ROUTES_H_
#define TESSERA_SERVICES_GATEWAY_REST_ROUTES_H_

#include <memory>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <grpcpp/support/status.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::gateway {

struct RestRoute {
  struct Segment {
    std::string literal;  // when field is empty
    std::string field;    // a {field} variable
    std::string verb;     // ":verb" after the variable, if any
  };
  std::string http_method;  // GET, POST, PUT, DELETE, PATCH
  std::string path;         // the template, e.g. "/v1/jobs/{job_id}"
  std::vector<Segment> segments;
  std::string body;  // "*", a field name, or "" (query parameters)
  const google::protobuf::MethodDescriptor* method = nullptr;
};

// The routes of `methods`' annotations; INVALID_ARGUMENT for a malformed
// template or one naming a field the request does not have (a build-time
// mistake: tests parse every route).
absl::StatusOr<std::vector<RestRoute>> RestRoutesOf(
    const std::vector<const google::protobuf::MethodDescriptor*>& methods);

// The route matching (method, path) and its path variables, or null.
const RestRoute* MatchRestRoute(const std::vector<RestRoute>& routes, absl::string_view http_method,
                                absl::string_view path, std::vector<std::pair<std::string, std::string>>* variables);

// Sets field `name` (proto or JSON name; "a.b" for a nested field) of `message` from its text
// form (a repeated field gets it appended): INVALID_ARGUMENT naming the field and why.
grpc::Status SetFieldFromText(google::protobuf::Message* message, absl::string_view name, absl::string_view text);

}  // namespace tessera::gateway

#endif  // TESSERA_SERVICES_GATEWAY_REST_ROUTES_H_
