// Build tool: writes the gateway's OpenAPI 3.0 document (served at /openapi.json)
// from the descriptors of the generated protos linked into it: a path
// /rpc/<Service>/<Method> for every public RPC (unary: JSON in and out; server
// streaming: text/event-stream), the (tessera.v1.http) routes of annotated RPCs
// with their path and query parameters, the gateway's own routes (events,
// files, preview, uploads), and components/schemas in the proto3 JSON mapping
// (int64 as strings, enums as string enums, repeated as arrays, maps as
// additionalProperties, Any as an object with @type, well-known types as their
// JSON forms).
//   openapi_generator OUT.json
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <google/protobuf/descriptor.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "services/gateway/rest_routes.h"
#include "services/gateway/rpc_forwarder.h"
#include "tessera/v1/access.pb.h"
#include "tessera/v1/fingerprint.grpc.pb.h"
#include "tessera/v1/operator.grpc.pb.h"
#include "tessera/v1/reconstruction.grpc.pb.h"
#include "tessera/v1/registration.grpc.pb.h"
#include "tessera/v1/scheduler.grpc.pb.h"
#include "tessera/v1/som.grpc.pb.h"
#include "tessera/v1/volume.grpc.pb.h"

namespace tessera::gateway {
namespace {
namespace pb = google::protobuf;
using Json = nlohmann::ordered_json;

// The public services (linked above); the gateway serves those a server hosts.
std::vector<const pb::ServiceDescriptor*> PublicServices() {
  // A message of each file (referencing it keeps the file linked in).
  const std::vector<const pb::FileDescriptor*> files = {
      v1::EnrollRequest::descriptor()->file(),       v1::ListAuditRecordsRequest::descriptor()->file(),
      v1::ReconstructRequest::descriptor()->file(),  v1::RegisterRequest::descriptor()->file(),
      v1::SubmitJobRequest::descriptor()->file(),    v1::CreateAtlasRequest::descriptor()->file(),
      v1::DescribeFileRequest::descriptor()->file()};
  std::vector<const pb::ServiceDescriptor*> out;
  for (const pb::FileDescriptor* f : files) {
    for (int i = 0; i < f->service_count(); ++i) {
      if (!IsPeerOnlyService(f->service(i)->full_name())) out.push_back(f->service(i));
    }
  }
  return out;
}

Json Ref(const std::string& name) { return Json{{"$ref", absl::StrCat("#/components/schemas/", name)}}; }

class SchemaWriter {
 public:
  // The schema of a message type, adding it (and what it uses) to the components.
  Json MessageRef(const pb::Descriptor* type) {
    Json wkt;
    if (WellKnown(type, &wkt)) return wkt;
    if (done_.insert(type->full_name()).second) {
      Json properties = Json::object();
      for (int i = 0; i < type->field_count(); ++i) {
        const pb::FieldDescriptor* f = type->field(i);
        Json schema = FieldSchema(f);
        if (f->is_map()) {
          schema = Json{{"type", "object"}, {"additionalProperties", ValueSchema(f->message_type()->map_value())}};
        } else if (f->is_repeated()) {
          schema = Json{{"type", "array"}, {"items", schema}};
        }
        properties[f->json_name()] = schema;
      }
      Json s{{"type", "object"}, {"properties", properties}};
      schemas_[type->full_name()] = s;
    }
    return Ref(type->full_name());
  }

  Json FieldSchema(const pb::FieldDescriptor* f) { return ValueSchema(f); }

  const Json& schemas() const { return schemas_; }
  Json& mutable_schemas() { return schemas_; }

 private:
  Json ValueSchema(const pb::FieldDescriptor* f) {
    switch (f->type()) {
      case pb::FieldDescriptor::TYPE_DOUBLE:
      case pb::FieldDescriptor::TYPE_FLOAT: return Json{{"type", "number"}};
      case pb::FieldDescriptor::TYPE_INT32:
      case pb::FieldDescriptor::TYPE_SINT32:
      case pb::FieldDescriptor::TYPE_SFIXED32: return Json{{"type", "integer"}, {"format", "int32"}};
      case pb::FieldDescriptor::TYPE_UINT32:
      case pb::FieldDescriptor::TYPE_FIXED32: return Json{{"type", "integer"}, {"format", "int64"}, {"minimum", 0}};
      case pb::FieldDescriptor::TYPE_INT64:
      case pb::FieldDescriptor::TYPE_SINT64:
      case pb::FieldDescriptor::TYPE_SFIXED64:
        return Json{{"type", "string"}, {"format", "int64"}, {"description", "64-bit integer as a decimal string"}};
      case pb::FieldDescriptor::TYPE_UINT64:
      case pb::FieldDescriptor::TYPE_FIXED64:
        return Json{{"type", "string"}, {"format", "uint64"}, {"description", "64-bit integer as a decimal string"}};
      case pb::FieldDescriptor::TYPE_BOOL: return Json{{"type", "boolean"}};
      case pb::FieldDescriptor::TYPE_STRING: return Json{{"type", "string"}};
      case pb::FieldDescriptor::TYPE_BYTES: return Json{{"type", "string"}, {"format", "byte"}};
      case pb::FieldDescriptor::TYPE_ENUM: {
        Json names = Json::array();
        for (int i = 0; i < f->enum_type()->value_count(); ++i) names.push_back(f->enum_type()->value(i)->name());
        return Json{{"type", "string"}, {"enum", names}};
      }
      case pb::FieldDescriptor::TYPE_MESSAGE:
      case pb::FieldDescriptor::TYPE_GROUP: return MessageRef(f->message_type());
    }
    return Json::object();
  }

  static bool WellKnown(const pb::Descriptor* type, Json* schema) {
    const std::string& n = type->full_name();
    if (n == "google.protobuf.Any") {
      *schema = Json{{"type", "object"},
                     {"description", "a message of the type @type names, with that type's fields beside @type"},
                     {"properties", {{"@type", {{"type", "string"}}}}},
                     {"required", {"@type"}},
                     {"additionalProperties", true}};
    } else if (n == "google.protobuf.Timestamp") {
      *schema = Json{{"type", "string"}, {"format", "date-time"}};
    } else if (n == "google.protobuf.Duration") {
      *schema = Json{{"type", "string"}, {"description", "seconds with an 's' suffix, e.g. \"1.5s\""}};
    } else if (n == "google.protobuf.Struct" || n == "google.protobuf.Empty") {
      *schema = Json{{"type", "object"}};
    } else if (n == "google.protobuf.Value") {
      *schema = Json{{"description", "any JSON value"}};
    } else if (n == "google.protobuf.ListValue") {
      *schema = Json{{"type", "array"}, {"items", Json::object()}};
    } else if (n == "google.protobuf.FieldMask") {
      *schema = Json{{"type", "string"}};
    } else if (n == "google.protobuf.BoolValue") {
      *schema = Json{{"type", "boolean"}};
    } else if (n == "google.protobuf.StringValue" || n == "google.protobuf.BytesValue" ||
               n == "google.protobuf.Int64Value" || n == "google.protobuf.UInt64Value") {
      *schema = Json{{"type", "string"}};
    } else if (n == "google.protobuf.Int32Value" || n == "google.protobuf.UInt32Value") {
      *schema = Json{{"type", "integer"}};
    } else if (n == "google.protobuf.DoubleValue" || n == "google.protobuf.FloatValue") {
      *schema = Json{{"type", "number"}};
    } else {
      return false;
    }
    return true;
  }

  std::set<std::string> done_;
  Json schemas_ = Json::object();
};

Json ErrorResponses() {
  return Json{{"default", {{"description", "the call failed: the gRPC status as JSON, the HTTP status per the "
                                            "standard mapping (Retry-After when the server gave a retry hint)"},
                           {"content", {{"application/json", {{"schema", Ref("Error")}}}}}}}};
}

std::string Describe(const pb::MethodDescriptor* m) {
  pb::SourceLocation where;
  std::string text = m->GetSourceLocation(&where) ? where.leading_comments : "";
  const v1::AccessRole role = m->options().GetExtension(v1::required_role);
  absl::StrAppend(&text, text.empty() ? "" : "\n", "gRPC: ", GrpcPath(*m), " (role: ", v1::AccessRole_Name(role), ")");
  return text;
}

Json Operation(SchemaWriter& schemas, const pb::MethodDescriptor* m, const std::string& id, bool with_body) {
  Json op{{"operationId", id}, {"tags", {m->service()->name()}}, {"summary", m->name()}, {"description", Describe(m)}};
  if (with_body) {
    op["requestBody"] = {{"required", false},
                         {"content", {{"application/json", {{"schema", schemas.MessageRef(m->input_type())}}}}}};
  }
  Json responses = ErrorResponses();
  if (m->server_streaming()) {
    // Referenced for readers: each event's data is one of these.
    schemas.MessageRef(m->output_type());
    responses["200"] = {{"description", absl::StrCat("Server-Sent Events: one 'data: <", m->output_type()->full_name(),
                                                     " JSON>' per message; a failure ends with 'event: error'")},
                        {"content", {{"text/event-stream", {{"schema", {{"type", "string"}}}}}}}};
  } else {
    responses["200"] = {{"description", "OK"},
                        {"content", {{"application/json", {{"schema", schemas.MessageRef(m->output_type())}}}}}};
  }
  op["responses"] = responses;
  return op;
}

Json PathParameter(const std::string& name, const std::string& description) {
  return Json{{"name", name}, {"in", "path"}, {"required", true}, {"description", description},
              {"schema", {{"type", "string"}}}};
}
Json QueryParameter(const std::string& name, Json schema, const std::string& description, bool required = false) {
  return Json{{"name", name}, {"in", "query"}, {"required", required}, {"description", description}, {"schema", schema}};
}

void AddGatewayRoutes(Json& paths) {
  paths["/v1/jobs/{job_id}/events"]["get"] = {
      {"operationId", "JobEvents"},
      {"tags", {"Gateway"}},
      {"summary", "a job's events as Server-Sent Events (SchedulerService.Watch)"},
      {"parameters",
       {PathParameter("job_id", "the job"),
        QueryParameter("after_sequence", {{"type", "integer"}}, "only events after this sequence number"),
        {{"name", "Last-Event-ID"}, {"in", "header"}, {"required", false}, {"schema", {{"type", "string"}}},
         {"description", "an EventSource resuming: events after this sequence"}}}},
      {"responses",
       {{"200", {{"description", "one event per tessera.v1.JobEvent (id: its sequence)"},
                 {"content", {{"text/event-stream", {{"schema", {{"type", "string"}}}}}}}}},
        {"default", ErrorResponses()["default"]}}}};
  paths["/v1/jobs/{job_id}/files/{name}"]["get"] = {
      {"operationId", "JobFile"},
      {"tags", {"Gateway"}},
      {"summary", "a result file's bytes (SchedulerService.DownloadFile); the name may hold one '/'"},
      {"parameters",
       {PathParameter("job_id", "the job"), PathParameter("name", "one of JobResult.files[].name"),
        {{"name", "Range"}, {"in", "header"}, {"required", false}, {"schema", {{"type", "string"}}},
         {"description", "bytes=N- or bytes=N-M: resume from byte N (206)"}}}},
      {"responses",
       {{"200", {{"description", "the file"},
                 {"content", {{"application/octet-stream", {{"schema", {{"type", "string"}, {"format", "binary"}}}}}}}}},
        {"206", {{"description", "the requested range"},
                 {"content", {{"application/octet-stream", {{"schema", {{"type", "string"}, {"format", "binary"}}}}}}}}},
        {"default", ErrorResponses()["default"]}}}};
  paths["/v1/jobs/{job_id}/preview.png"]["get"] = {
      {"operationId", "JobPreview"},
      {"tags", {"Gateway"}},
      {"summary", "a PNG preview of a succeeded job's result (SchedulerService.GetPreview)"},
      {"parameters",
       {PathParameter("job_id", "the job"), QueryParameter("name", {{"type", "string"}}, "a result file to show"),
        QueryParameter("max_edge", {{"type", "integer"}}, "longest edge in pixels, 64..2048 (default 512)")}},
      {"responses",
       {{"200", {{"description", "the preview"},
                 {"content", {{"image/png", {{"schema", {{"type", "string"}, {"format", "binary"}}}}}}}}},
        {"default", ErrorResponses()["default"]}}}};
  for (const char* target : {"registration", "reconstruction"}) {
    const std::string service = std::string(target) == "registration" ? "RegistrationService" : "ReconstructionService";
    paths[absl::StrCat("/v1/uploads/", target)]["put"] = {
        {"operationId", absl::StrCat("Upload_", target)},
        {"tags", {"Gateway"}},
        {"summary", absl::StrCat("streams the body into ", service, ".UploadFile (Content-Length required)")},
        {"parameters", {QueryParameter("filename", {{"type", "string"}}, "the file's name (tells its type)", true)}},
        {"requestBody",
         {{"required", true},
          {"content", {{"application/octet-stream", {{"schema", {{"type", "string"}, {"format", "binary"}}}}}}}}},
        {"responses",
         {{"200", {{"description", "stored"},
                   {"content", {{"application/json", {{"schema", Ref("tessera.v1.UploadedFile")}}}}}}},
          {"default", ErrorResponses()["default"]}}}};
  }
  paths["/openapi.json"]["get"] = {{"operationId", "OpenApi"},
                                   {"tags", {"Gateway"}},
                                   {"security", Json::array()},
                                   {"summary", "this document"},
                                   {"responses", {{"200", {{"description", "OpenAPI 3.0"},
                                                           {"content", {{"application/json", {{"schema", {{"type", "object"}}}}}}}}}}}};
  paths["/healthz"]["get"] = {{"operationId", "Health"},
                              {"tags", {"Gateway"}},
                              {"security", Json::array()},
                              {"summary", "liveness of the gateway (open)"},
                              {"responses", {{"200", {{"description", "serving"},
                                                      {"content", {{"application/json", {{"schema", {{"type", "object"}}}}}}}}}}}};
  paths["/console/"]["get"] = {{"operationId", "Console"},
                               {"tags", {"Gateway"}},
                               {"security", Json::array()},
                               {"summary", "the operator console (static files; it asks for a token)"},
                               {"responses", {{"200", {{"description", "the console's page"},
                                                       {"content", {{"text/html", {{"schema", {{"type", "string"}}}}}}}}}}}};
}

}  // namespace

int Main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: openapi_generator OUT.json\n";
    return 2;
  }
  SchemaWriter schemas;
  Json paths = Json::object();
  std::vector<const pb::MethodDescriptor*> methods;
  for (const pb::ServiceDescriptor* service : PublicServices()) {
    for (int i = 0; i < service->method_count(); ++i) {
      const pb::MethodDescriptor* m = service->method(i);
      methods.push_back(m);
      if (m->client_streaming()) continue;  // reached through the upload routes
      paths[absl::StrCat("/rpc/", service->full_name(), "/", m->name())]["post"] =
          Operation(schemas, m, absl::StrCat(service->name(), "_", m->name()), true);
    }
  }
  absl::StatusOr<std::vector<RestRoute>> routes = RestRoutesOf(methods);
  if (!routes.ok()) {
    std::cerr << "openapi_generator: " << routes.status() << "\n";
    return 1;
  }
  for (const RestRoute& route : *routes) {
    const pb::MethodDescriptor* m = route.method;
    Json op = Operation(schemas, m, absl::StrCat(m->service()->name(), "_", m->name(), "_rest"), route.body == "*");
    Json parameters = Json::array();
    std::set<std::string> bound;
    for (const RestRoute::Segment& s : route.segments) {
      if (s.field.empty()) continue;
      bound.insert(s.field);
      Json p = PathParameter(s.field, "bound to the request field of this name");
      p["schema"] = schemas.FieldSchema(m->input_type()->FindFieldByName(s.field));
      parameters.push_back(p);
    }
    if (!route.body.empty() && route.body != "*") {
      const pb::FieldDescriptor* f = m->input_type()->FindFieldByName(route.body);
      bound.insert(route.body);
      op["requestBody"] = {{"required", true},
                           {"content", {{"application/json", {{"schema", schemas.MessageRef(f->message_type())}}}}}};
    }
    if (route.body != "*") {  // the other scalar fields as query parameters
      for (int i = 0; i < m->input_type()->field_count(); ++i) {
        const pb::FieldDescriptor* f = m->input_type()->field(i);
        if (bound.count(f->name()) || f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE ||
            f->type() == pb::FieldDescriptor::TYPE_BYTES) {
          continue;
        }
        Json schema = schemas.FieldSchema(f);
        if (f->is_repeated()) schema = Json{{"type", "array"}, {"items", schema}};
        parameters.push_back(QueryParameter(f->name(), schema, f->is_repeated() ? "repeat for more values" : ""));
      }
    }
    if (!parameters.empty()) op["parameters"] = parameters;
    std::string method = route.http_method;
    for (char& c : method) c = static_cast<char>(std::tolower(c));
    paths[route.path][method] = op;
  }
  AddGatewayRoutes(paths);
  schemas.MessageRef(v1::UploadedFile::descriptor());
  schemas.mutable_schemas()["Error"] = {
      {"type", "object"},
      {"required", {"code", "status", "message"}},
      {"properties",
       {{"code", {{"type", "integer"}, {"description", "the gRPC status code"}}},
        {"status", {{"type", "string"}, {"description", "its name, e.g. NOT_FOUND"}}},
        {"message", {{"type", "string"}}},
        {"retryAfterMs", {{"type", "integer"}, {"description", "the server's retry hint (grpc-retry-pushback-ms)"}}}}}};
  Json doc{{"openapi", "3.0.3"},
           {"info",
            {{"title", "Tessera HTTP/JSON API"},
             {"version", "v1"},
             {"description",
              "The HTTP/JSON gateway of `tessera serve --http-port`: every public unary RPC at "
              "POST /rpc/<package.Service>/<Method> with the request and response in the proto3 JSON mapping, "
              "server-streaming RPCs there as Server-Sent Events, REST routes from the protos' (tessera.v1.http) "
              "options, and the gateway's own file, preview, event and upload routes. Generated from the protos "
              "at build time."}}},
           {"components",
            {{"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}},
             {"schemas", schemas.schemas()}}},
           {"security", {{{"bearer", Json::array()}}}},
           {"paths", paths}};
  std::ofstream out(argv[1]);
  out << doc.dump(1) << "\n";
  return out.good() ? 0 : 1;
}

}  // namespace tessera::gateway

int main(int argc, char** argv) { return tessera::gateway::Main(argc, argv); }
