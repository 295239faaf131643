// The HTTP/JSON gateway against a real `tessera serve --http-port 0` (token
// file, audit log, CPU): every public unary RPC answers over HTTP as over gRPC;
// a job submitted over HTTP reads the same through Get/List/GetResult either
// way; refused calls are refused and audited alike; SSE progress (and resume);
// downloads with Range; streamed uploads (bounded server memory); the error
// mapping with Retry-After; every path of the OpenAPI document answers.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <nifti/nifti1.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "services/gateway/embedded_files.h"
#include "services/gateway/rpc_forwarder.h"
#include "tessera/v1/common.pb.h"
#include "tessera/v1/fingerprint.pb.h"
#include "tessera/v1/operator.pb.h"
#include "tessera/v1/reconstruction.pb.h"
#include "tessera/v1/registration.pb.h"
#include "tessera/v1/scheduler.pb.h"
#include "tessera/v1/som.pb.h"
#include "tessera/v1/volume.pb.h"

namespace tessera::gateway {
namespace {
namespace pb = google::protobuf;
using Json = nlohmann::json;

constexpr char kAdmin[] = "admin-token-0123456789";
constexpr char kReader[] = "reader-token-0123456789";
constexpr char kTemplate[] = "/usr/share/mricron/templates/ch2.nii.gz";  // Debian mricron-data

std::string Tmp(const std::string& name) { return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A `tessera serve` child; its first stdout lines give the ports.
class Serve {
 public:
  explicit Serve(const std::vector<std::string>& extra, const std::string& name) {
    const std::string dir = Tmp(name);
    EXPECT_EQ(std::system(absl::StrCat("rm -rf '", dir, "' && mkdir -p '", dir, "'").c_str()), 0);
    std::ofstream(dir + "/tokens") << kAdmin << " alice admin\n" << kReader << " bob reader\n";
    audit_ = dir + "/audit.jsonl";
    std::vector<std::string> args = {absl::StrCat(std::getenv("TEST_SRCDIR"), "/tessera/cli/tessera"),
                                     "serve", "--grpc-port=0", "--metrics-port=-1", "--http-port=0", "--device=cpu",
                                     "--data-root=" + dir, "--data-root=/usr/share/mricron/templates",
                                     "--token-file=" + dir + "/tokens", "--audit-log=" + audit_,
                                     "--state-dir=" + dir + "/state", "--drain-timeout-s=1"};
    args.insert(args.end(), extra.begin(), extra.end());
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], 1);
      const int err = open((dir + "/serve.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      dup2(err, 2);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    FILE* f = fdopen(out[0], "r");
    char line[256];
    while (http_port_ <= 0 && std::fgets(line, sizeof(line), f) != nullptr) {
      std::sscanf(line, "grpc_port=%d", &grpc_port_);
      std::sscanf(line, "http_port=%d", &http_port_);
    }
    stdout_ = f;  // kept open: the child may print more
  }
  ~Serve() {
    if (pid_ > 0) {
      kill(pid_, SIGTERM);
      waitpid(pid_, nullptr, 0);
    }
    if (stdout_ != nullptr) std::fclose(stdout_);
  }
  bool ok() const { return grpc_port_ > 0 && http_port_ > 0; }
  int http_port() const { return http_port_; }
  pid_t pid() const { return pid_; }
  httplib::Client Http() const {
    httplib::Client c("127.0.0.1", http_port_);
    c.set_read_timeout(60, 0);
    return c;
  }
  std::shared_ptr<grpc::Channel> Grpc() const {
    return grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port_), grpc::InsecureChannelCredentials());
  }
  std::vector<Json> Audit() const {
    std::vector<Json> records;
    for (absl::string_view line : absl::StrSplit(ReadFile(audit_), '\n', absl::SkipEmpty())) {
      records.push_back(Json::parse(std::string(line)));
    }
    return records;
  }

 private:
  pid_t pid_ = -1;
  FILE* stdout_ = nullptr;
  int grpc_port_ = 0, http_port_ = 0;
  std::string audit_;
};

// Every public service (what the gateway of an all-services server exposes). Touching a
// message of each file keeps it linked in, so the descriptor pool has the services.
std::vector<std::string> PublicServices() {
  for (const pb::Descriptor* d :
       {v1::EnrollRequest::descriptor(), v1::ListAuditRecordsRequest::descriptor(),
        v1::ReconstructRequest::descriptor(), v1::RegisterRequest::descriptor(), v1::SubmitJobRequest::descriptor(),
        v1::CreateAtlasRequest::descriptor(), v1::DescribeFileRequest::descriptor()}) {
    EXPECT_NE(d->file()->service_count(), 0);
  }
  return {"tessera.v1.FingerprintService",   "tessera.v1.OperatorService", "tessera.v1.ReconstructionService",
          "tessera.v1.RegistrationService",  "tessera.v1.SchedulerService", "tessera.v1.SomAtlasService",
          "tessera.v1.VolumeService"};
}

struct GrpcAnswer {
  grpc::StatusCode code;
  std::string message;
  std::string json;
};

// A unary call over the network gRPC channel (the gateway's forwarder works on any channel).
GrpcAnswer CallGrpc(const Serve& serve, const std::string& service, const std::string& method,
                    const std::string& request_json, const std::string& token = kAdmin) {
  RpcForwarder grpc(serve.Grpc(), PublicServices());
  const pb::MethodDescriptor* m = *grpc.FindMethod(service, method);
  std::unique_ptr<pb::Message> request = RpcForwarder::NewMessage(m->input_type());
  EXPECT_TRUE(RpcForwarder::ParseJson(request_json, request.get()).ok()) << request_json;
  std::unique_ptr<pb::Message> response = RpcForwarder::NewMessage(m->output_type());
  CallerHeaders caller;
  if (!std::string(token).empty()) caller.authorization = absl::StrCat("Bearer ", token);
  auto context = RpcForwarder::NewContext(caller);
  const CallOutcome outcome = grpc.Unary(*m, context.get(), *request, response.get());
  return {outcome.status.error_code(), outcome.status.error_message(),
          outcome.status.ok() ? RpcForwarder::ToJson(*response) : ""};
}

// Sends `request` on a new connection and returns what the server answers before closing.
std::string RawExchange(int port, const std::string& request) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) return "connect failed";
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) return "send failed";
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = recv(fd, buffer, sizeof(buffer), 0)) > 0;) answer.append(buffer, static_cast<size_t>(n));
  close(fd);
  return answer;
}

httplib::Headers Auth(const std::string& token = kAdmin) {
  return token.empty() ? httplib::Headers{} : httplib::Headers{{"Authorization", absl::StrCat("Bearer ", token)}};
}

httplib::Result PostRpc(const Serve& serve, const std::string& service, const std::string& method,
                        const std::string& body, const std::string& token = kAdmin) {
  return serve.Http().Post(absl::StrCat("/rpc/", service, "/", method).c_str(), Auth(token), body, "application/json");
}

// A registration small enough for seconds on a CPU: the template against itself, rigid, 2 iterations at 1/4.
std::string RegistrationSubmit(const std::string& request_id) {
  return Json{{"spec",
               {{"kind", "registration"},
                {"spec",
                 {{"@type", "type.googleapis.com/tessera.v1.RegisterRequest"},
                  {"fixed", {{"path", kTemplate}}},
                  {"moving", {{"path", kTemplate}}},
                  {"options",
                   {{"stages", {"rigid"}}, {"scales", {4}}, {"rigidIterations", {2}}, {"device", "cpu"}}}}}}},
              {"requestId", request_id}}
      .dump();
}

Json WaitForJob(const Serve& serve, const std::string& job_id) {
  for (int i = 0; i < 600; ++i) {
    auto r = serve.Http().Get(absl::StrCat("/v1/jobs/", job_id).c_str(), Auth());
    if (r && r->status == 200) {
      Json job = Json::parse(r->body);
      const std::string state = job.value("state", "");
      if (state == "JOB_STATE_SUCCEEDED" || state == "JOB_STATE_FAILED" || state == "JOB_STATE_CANCELLED") return job;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return Json::object();
}

class GatewayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    signal(SIGPIPE, SIG_IGN);  // the server closes on bodies it refuses unread
    serve_ = new Serve({}, "serve");
  }
  static void TearDownTestSuite() {
    delete serve_;
    serve_ = nullptr;
  }
  static Serve* serve_;
};
Serve* GatewayTest::serve_ = nullptr;

TEST_F(GatewayTest, EveryUnaryRpcAnswersOverHttpAsOverGrpc) {
  ASSERT_TRUE(serve_->ok());
  RpcForwarder forwarder(serve_->Grpc(), PublicServices());
  int compared = 0;
  std::set<std::string> services;
  for (const pb::MethodDescriptor* m : forwarder.PublicMethods()) {
    if (m->client_streaming() || m->server_streaming()) continue;
    const std::string service = m->service()->full_name();
    // The empty request: each method's own answer to it (mostly INVALID_ARGUMENT naming a field,
    // or a listing), which must not depend on how it was asked.
    const GrpcAnswer grpc = CallGrpc(*serve_, service, m->name(), "{}");
    auto http = PostRpc(*serve_, service, m->name(), "{}");
    ASSERT_TRUE(http) << m->full_name();
    Json body = Json::parse(http->body);
    if (grpc.code == grpc::StatusCode::OK) {
      EXPECT_EQ(http->status, 200) << m->full_name() << ": " << http->body;
      // Live answers differ between two calls (counters, timings, the audit trail that just grew):
      // there the fields present must agree; everywhere else the whole answer.
      const Json expected = Json::parse(grpc.json);
      if (m->name() == "ListWorkers" || m->name() == "GetServerStats" || m->name() == "SearchBatch" ||
          m->name() == "ListAuditRecords") {
        std::vector<std::string> got, want;
        for (const auto& [key, value] : body.items()) got.push_back(key);
        for (const auto& [key, value] : expected.items()) want.push_back(key);
        EXPECT_EQ(got, want) << m->full_name();
      } else {
        EXPECT_EQ(body, expected) << m->full_name();
      }
    } else {
      EXPECT_EQ(body["code"].get<int>(), static_cast<int>(grpc.code)) << m->full_name() << ": " << http->body;
      EXPECT_EQ(body["message"].get<std::string>(), grpc.message) << m->full_name();
    }
    services.insert(service);
    ++compared;
  }
  EXPECT_GE(compared, 40);
  EXPECT_EQ(services.size(), PublicServices().size());
}

TEST_F(GatewayTest, JobOverHttpReadsTheSameOverGrpcAndStreamsProgress) {
  ASSERT_TRUE(serve_->ok());
  auto submitted = serve_->Http().Post("/v1/jobs", Auth(), RegistrationSubmit("http-job-1"), "application/json");
  ASSERT_TRUE(submitted);
  ASSERT_EQ(submitted->status, 200) << submitted->body;
  const std::string job_id = Json::parse(submitted->body)["jobId"];
  // The same request id over gRPC is the same job (idempotent Submit): both paths built one request.
  EXPECT_EQ(Json::parse(CallGrpc(*serve_, "tessera.v1.SchedulerService", "Submit", RegistrationSubmit("http-job-1")).json)["jobId"],
            job_id);

  // Progress as Server-Sent Events until the job ends.
  std::string stream;
  auto events = serve_->Http().Get(absl::StrCat("/v1/jobs/", job_id, "/events").c_str(), Auth(),
                                   [&](const char* data, size_t n) {
                                     stream.append(data, n);
                                     return true;
                                   });
  ASSERT_TRUE(events);
  EXPECT_EQ(events->status, 200);
  EXPECT_TRUE(absl::StartsWith(events->get_header_value("Content-Type"), "text/event-stream"));
  std::vector<int64_t> ids;
  std::vector<Json> data;
  for (absl::string_view block : absl::StrSplit(stream, "\n\n", absl::SkipEmpty())) {
    for (absl::string_view line : absl::StrSplit(block, '\n')) {
      if (absl::ConsumePrefix(&line, "id: ")) ids.push_back(std::stoll(std::string(line)));
      if (absl::ConsumePrefix(&line, "data: ")) data.push_back(Json::parse(std::string(line)));
    }
  }
  ASSERT_GE(data.size(), 3u) << stream;
  ASSERT_EQ(ids.size(), data.size()) << stream;
  for (size_t i = 1; i < ids.size(); ++i) EXPECT_GT(ids[i], ids[i - 1]);
  EXPECT_EQ(data.back().value("state", ""), "JOB_STATE_SUCCEEDED") << stream;
  // An EventSource reconnecting with Last-Event-ID gets only the later events.
  httplib::Headers resume = Auth();
  resume.emplace("Last-Event-ID", std::to_string(ids[0]));
  auto rest = serve_->Http().Get(absl::StrCat("/v1/jobs/", job_id, "/events").c_str(), resume);
  ASSERT_TRUE(rest);
  EXPECT_FALSE(absl::StrContains(rest->body, absl::StrCat("id: ", ids[0], "\n")));
  EXPECT_TRUE(absl::StrContains(rest->body, absl::StrCat("id: ", ids[1], "\n")));

  // The caller's trace context goes through to the server, which echoes it.
  httplib::Headers traced = Auth();
  traced.emplace("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
  auto traced_get = serve_->Http().Get(absl::StrCat("/v1/jobs/", job_id).c_str(), traced);
  ASSERT_TRUE(traced_get);
  EXPECT_TRUE(absl::StrContains(traced_get->get_header_value("traceparent"), "0af7651916cd43dd8448eb211c80319c"))
      << traced_get->get_header_value("traceparent");

  // Get, List and GetResult: REST route, /rpc/ route and gRPC agree.
  const std::string ref = Json{{"jobId", job_id}}.dump();
  for (const auto& [method, rest_path] : std::vector<std::pair<std::string, std::string>>{
           {"Get", absl::StrCat("/v1/jobs/", job_id)}, {"GetResult", absl::StrCat("/v1/jobs/", job_id, "/result")},
           {"List", "/v1/jobs?page_size=50"}}) {
    const std::string request = method == "List" ? "{\"pageSize\": 50}" : ref;
    const GrpcAnswer grpc = CallGrpc(*serve_, "tessera.v1.SchedulerService", method, request);
    ASSERT_EQ(grpc.code, grpc::StatusCode::OK) << method << ": " << grpc.message;
    auto via_rpc = PostRpc(*serve_, "tessera.v1.SchedulerService", method, request);
    auto via_rest = serve_->Http().Get(rest_path.c_str(), Auth());
    ASSERT_TRUE(via_rpc && via_rest);
    EXPECT_EQ(Json::parse(via_rpc->body), Json::parse(grpc.json)) << method;
    EXPECT_EQ(Json::parse(via_rest->body), Json::parse(grpc.json)) << method;
  }

  // A result file: whole, and from an offset with Range.
  const Json result = Json::parse(CallGrpc(*serve_, "tessera.v1.SchedulerService", "GetResult", ref).json);
  std::string name;
  for (const Json& f : result["files"]) {
    if (absl::EndsWith(f["name"].get<std::string>(), ".nii.gz")) name = f["name"];
  }
  ASSERT_FALSE(name.empty()) << result.dump();
  auto whole = serve_->Http().Get(absl::StrCat("/v1/jobs/", job_id, "/files/", name).c_str(), Auth());
  ASSERT_TRUE(whole);
  ASSERT_EQ(whole->status, 200) << whole->body;
  ASSERT_GT(whole->body.size(), 1000u);
  EXPECT_EQ(whole->body.substr(0, 2), "\x1f\x8b");  // gzip
  httplib::Headers range = Auth();
  range.emplace("Range", "bytes=1000-");
  auto tail = serve_->Http().Get(absl::StrCat("/v1/jobs/", job_id, "/files/", name).c_str(), range);
  ASSERT_TRUE(tail);
  EXPECT_EQ(tail->status, 206);
  EXPECT_EQ(tail->get_header_value("Content-Range"),
            absl::StrCat("bytes 1000-", whole->body.size() - 1, "/", whole->body.size()));
  EXPECT_EQ(tail->body, whole->body.substr(1000));
  range = Auth();
  range.emplace("Range", "bytes=10-19");
  auto slice = serve_->Http().Get(absl::StrCat("/v1/jobs/", job_id, "/files/", name).c_str(), range);
  ASSERT_TRUE(slice);
  EXPECT_EQ(slice->status, 206);
  EXPECT_EQ(slice->body, whole->body.substr(10, 10));
  auto missing = serve_->Http().Get(absl::StrCat("/v1/jobs/", job_id, "/files/no-such-file").c_str(), Auth());
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404) << missing->body;

  // Its preview, a PNG.
  auto preview = serve_->Http().Get(absl::StrCat("/v1/jobs/", job_id, "/preview.png?max_edge=128").c_str(), Auth());
  ASSERT_TRUE(preview);
  EXPECT_EQ(preview->status, 200) << preview->body;
  EXPECT_EQ(preview->get_header_value("Content-Type"), "image/png");
  EXPECT_EQ(preview->body.substr(1, 3), "PNG");
}

TEST_F(GatewayTest, RefusedHttpCallsAreRefusedAndAuditedLikeGrpc) {
  ASSERT_TRUE(serve_->ok());
  const std::string service = "tessera.v1.SchedulerService";
  // No token: 401 over HTTP, UNAUTHENTICATED over gRPC, one audit record each, alike.
  auto http = PostRpc(*serve_, service, "List", "{}", "");
  ASSERT_TRUE(http);
  EXPECT_EQ(http->status, 401);
  EXPECT_EQ(Json::parse(http->body)["status"], "UNAUTHENTICATED");
  EXPECT_EQ(CallGrpc(*serve_, service, "List", "{}", "").code, grpc::StatusCode::UNAUTHENTICATED);
  // A reader may not list the audit trail: 403 / PERMISSION_DENIED.
  auto denied = serve_->Http().Get("/v1/audit", Auth(kReader));
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 403) << denied->body;
  EXPECT_EQ(CallGrpc(*serve_, "tessera.v1.OperatorService", "ListAuditRecords", "{}", kReader).code,
            grpc::StatusCode::PERMISSION_DENIED);

  const std::vector<Json> audit = serve_->Audit();
  ASSERT_GE(audit.size(), 4u);
  const Json& http_refused = audit[audit.size() - 4];
  const Json& grpc_refused = audit[audit.size() - 3];
  for (const Json* r : {&http_refused, &grpc_refused}) {
    EXPECT_EQ((*r)["method"], "/tessera.v1.SchedulerService/List") << r->dump();
    EXPECT_EQ((*r)["outcome"], "UNAUTHENTICATED") << r->dump();
  }
  EXPECT_TRUE(absl::StartsWith(http_refused["peer"].get<std::string>(), "http:127.0.0.1")) << http_refused.dump();
  EXPECT_FALSE(absl::StartsWith(grpc_refused["peer"].get<std::string>(), "http:")) << grpc_refused.dump();
  const Json& http_denied = audit[audit.size() - 2];
  const Json& grpc_denied = audit[audit.size() - 1];
  for (const Json* r : {&http_denied, &grpc_denied}) {
    EXPECT_EQ((*r)["method"], "/tessera.v1.OperatorService/ListAuditRecords") << r->dump();
    EXPECT_EQ((*r)["outcome"], "PERMISSION_DENIED") << r->dump();
    EXPECT_EQ((*r)["principal"], "bob") << r->dump();
  }
}

TEST_F(GatewayTest, BadRequestsGetClearJsonErrors) {
  ASSERT_TRUE(serve_->ok());
  auto unknown_field = PostRpc(*serve_, "tessera.v1.SchedulerService", "Get", "{\"jobIdd\": \"x\"}");
  ASSERT_TRUE(unknown_field);
  EXPECT_EQ(unknown_field->status, 400);
  EXPECT_TRUE(absl::StrContains(Json::parse(unknown_field->body)["message"].get<std::string>(), "jobIdd"));
  auto not_json = PostRpc(*serve_, "tessera.v1.SchedulerService", "Get", "{job");
  ASSERT_TRUE(not_json);
  EXPECT_EQ(not_json->status, 400);
  auto no_method = PostRpc(*serve_, "tessera.v1.SchedulerService", "Nope", "{}");
  ASSERT_TRUE(no_method);
  EXPECT_EQ(no_method->status, 404);
  auto peer_only = PostRpc(*serve_, "tessera.v1.WorkerService", "Describe", "{}");
  ASSERT_TRUE(peer_only);
  EXPECT_EQ(peer_only->status, 404) << peer_only->body;
  auto streaming_in = PostRpc(*serve_, "tessera.v1.RegistrationService", "UploadVolume", "{}");
  ASSERT_TRUE(streaming_in);
  EXPECT_EQ(streaming_in->status, 501);
  auto wrong_verb = serve_->Http().Get("/rpc/tessera.v1.SchedulerService/List", Auth());
  ASSERT_TRUE(wrong_verb);
  EXPECT_EQ(wrong_verb->status, 405);
  auto no_job = serve_->Http().Get("/v1/jobs/no-such-job", Auth());
  ASSERT_TRUE(no_job);
  EXPECT_EQ(no_job->status, 404);
  EXPECT_EQ(Json::parse(no_job->body)["code"], 5);
  auto bad_query = serve_->Http().Get("/v1/jobs?page_size=many", Auth());
  ASSERT_TRUE(bad_query);
  EXPECT_EQ(bad_query->status, 400);
  EXPECT_TRUE(absl::StrContains(bad_query->body, "page_size"));
  // A JSON body over the server's message limit (--max-message-mb 64 here) is refused unread:
  // the answer comes after the headers alone.
  const std::string headers = RawExchange(
      serve_->http_port(), absl::StrCat("POST /rpc/tessera.v1.SchedulerService/List HTTP/1.1\r\nHost: x\r\n"
                                        "Authorization: Bearer ", kAdmin, "\r\nContent-Type: application/json\r\n"
                                        "Content-Length: ", int64_t{65} << 20, "\r\n\r\n{"));
  EXPECT_TRUE(absl::StartsWith(headers, "HTTP/1.1 413")) << headers;
  EXPECT_TRUE(absl::StrContains(headers, "RESOURCE_EXHAUSTED")) << headers;
  // An upload without Content-Length.
  auto chunked = serve_->Http().Put(
      "/v1/uploads/registration?filename=x.nii", Auth(),
      [](size_t offset, httplib::DataSink& sink) {
        if (offset == 0) sink.write("abc", 3);
        sink.done();
        return true;
      },
      "application/octet-stream");
  ASSERT_TRUE(chunked);
  EXPECT_EQ(chunked->status, 411);
  // Open routes.
  auto health = serve_->Http().Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto console = serve_->Http().Get("/console/");
  ASSERT_TRUE(console);
  EXPECT_EQ(console->status, 200);
  EXPECT_TRUE(absl::StrContains(console->body, "<html") || absl::StrContains(console->body, "<!doctype html"));
}

// An uncompressed NIfTI-1 of `bytes` voxels (uint8), written without holding it.
void WriteNifti(const std::string& path, int64_t bytes) {
  nifti_1_header h;
  std::memset(&h, 0, sizeof(h));
  h.sizeof_hdr = 348;
  h.dim[0] = 3;
  h.dim[1] = 256;
  h.dim[2] = 256;
  h.dim[3] = static_cast<short>(bytes / (256 * 256));
  h.datatype = DT_UINT8;
  h.bitpix = 8;
  h.pixdim[0] = 1;
  h.pixdim[1] = h.pixdim[2] = h.pixdim[3] = 1;
  h.vox_offset = 352;
  h.sform_code = 1;
  h.srow_x[0] = h.srow_y[1] = h.srow_z[2] = 1;
  std::memcpy(h.magic, "n+1\0", 4);
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&h), sizeof(h));
  out.write("\0\0\0\0", 4);
  std::string block(1 << 20, '\0');
  for (int64_t i = 0; i < 256 * 256 * int64_t{h.dim[3]}; i += block.size()) {
    for (size_t j = 0; j < block.size(); j += 4096) block[j] = static_cast<char>(i / block.size());
    out.write(block.data(), static_cast<std::streamsize>(block.size()));
  }
}

int64_t PeakRssBytes(pid_t pid) {
  std::istringstream status(ReadFile(absl::StrCat("/proc/", pid, "/status")));
  std::string line;
  while (std::getline(status, line)) {
    if (absl::StartsWith(line, "VmHWM:")) return std::stoll(line.substr(6)) * 1024;
  }
  return -1;
}

TEST_F(GatewayTest, UploadsStreamWithoutHoldingTheFile) {
  ASSERT_TRUE(serve_->ok());
  const std::string path = Tmp("upload.nii");
  const int64_t voxels = int64_t{128} << 20;  // 128 MiB
  WriteNifti(path, voxels);
  const int64_t size = static_cast<int64_t>(std::ifstream(path, std::ios::ate | std::ios::binary).tellg());
  const int64_t before = PeakRssBytes(serve_->pid());
  std::ifstream in(path, std::ios::binary);
  auto uploaded = serve_->Http().Put(
      "/v1/uploads/registration?filename=big.nii", Auth(), static_cast<size_t>(size),
      [&](size_t offset, size_t length, httplib::DataSink& sink) {
        std::string buffer(std::min<size_t>(length, 1 << 20), '\0');
        in.seekg(static_cast<std::streamoff>(offset));
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        return sink.write(buffer.data(), static_cast<size_t>(in.gcount()));
      },
      "application/octet-stream");
  ASSERT_TRUE(uploaded);
  ASSERT_EQ(uploaded->status, 200) << uploaded->body;
  const Json file = Json::parse(uploaded->body);
  EXPECT_EQ(file["nbytes"], std::to_string(size));
  EXPECT_FALSE(file["uploadId"].get<std::string>().empty());
  const int64_t after = PeakRssBytes(serve_->pid());
  std::printf("upload of %lld bytes: server peak RSS %lld -> %lld bytes\n", static_cast<long long>(size),
              static_cast<long long>(before), static_cast<long long>(after));
  EXPECT_LT(after - before, size / 4) << "the server's peak memory grew with the upload";
  // A small one's answer is the service's UploadedFile, sha256 of what was sent.
  const std::string small = ReadFile(kTemplate);
  auto ch2 = serve_->Http().Put("/v1/uploads/registration?filename=ch2.nii.gz", Auth(), small,
                                "application/octet-stream");
  ASSERT_TRUE(ch2);
  ASSERT_EQ(ch2->status, 200) << ch2->body;
  EXPECT_EQ(Json::parse(ch2->body)["nbytes"], std::to_string(small.size()));
  EXPECT_EQ(Json::parse(ch2->body)["sha256"].get<std::string>().size(), 64u);
}

TEST_F(GatewayTest, EveryOpenApiPathAnswers) {
  ASSERT_TRUE(serve_->ok());
  auto submitted = serve_->Http().Post("/v1/jobs", Auth(), RegistrationSubmit("openapi-job"), "application/json");
  ASSERT_TRUE(submitted && submitted->status == 200);
  const std::string job_id = Json::parse(submitted->body)["jobId"];
  ASSERT_EQ(WaitForJob(*serve_, job_id).value("state", ""), "JOB_STATE_SUCCEEDED");
  const Json result = Json::parse(CallGrpc(*serve_, "tessera.v1.SchedulerService", "GetResult",
                                           Json{{"jobId", job_id}}.dump()).json);
  const std::map<std::string, std::string> values = {
      {"{job_id}", job_id}, {"{name}", result["files"][0]["name"]}, {"{gallery}", "default"},
      {"{subject_id}", "nobody"}, {"{atlas_id}", "none"}};
  const Json doc = Json::parse(std::string(FindEmbedded(OpenApiFiles(), "openapi.json")->bytes()));
  int checked = 0;
  for (const auto& [templ, operations] : doc["paths"].items()) {
    std::string path = templ;
    for (const auto& [var, value] : values) path = absl::StrReplaceAll(path, {{var, value}});
    ASSERT_FALSE(absl::StrContains(path, "{")) << templ;
    for (const auto& [verb, op] : operations.items()) {
      // Cancel and delete would change the job the other routes read: they go last, on their own job.
      if (verb == "delete" || absl::StrContains(templ, ":cancel")) continue;
      const auto call = [&]() -> httplib::Result {
        if (verb == "get") return serve_->Http().Get(path.c_str(), Auth());
        if (verb == "put") {
          return serve_->Http().Put((path + "?filename=x.nii").c_str(), Auth(), "", "application/octet-stream");
        }
        return serve_->Http().Post(path.c_str(), Auth(), "{}", "application/json");
      };
      httplib::Result r = call();
      ASSERT_TRUE(r) << verb << " " << path;
      // Answered by its route: not the gateway's "no route" 404, not 405, not 501 (unimplemented).
      EXPECT_NE(r->status, 501) << verb << " " << path << ": " << r->body;
      EXPECT_NE(r->status, 405) << verb << " " << path << ": " << r->body;
      if (r->status == 404) {
        const std::string message = Json::parse(r->body).value("message", "");
        EXPECT_FALSE(absl::StartsWith(message, "no route") || absl::StartsWith(message, "no service"))
            << verb << " " << path << ": " << r->body;
      }
      ++checked;
    }
  }
  auto cancel = serve_->Http().Post(absl::StrCat("/v1/jobs/", job_id, ":cancel").c_str(), Auth(), "", "application/json");
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->status, 200) << cancel->body;  // cancelling an ended job answers it as it is
  auto deleted = serve_->Http().Delete(absl::StrCat("/v1/jobs/", job_id).c_str(), Auth());
  ASSERT_TRUE(deleted);
  EXPECT_EQ(deleted->status, 200) << deleted->body;
  EXPECT_TRUE(absl::StrContains(deleted->body, "resultsDeleted")) << deleted->body;
  EXPECT_GE(checked, 70);
}

TEST(GatewayTlsTest, HttpsWithTheGrpcCertificate) {
  const std::string dir = Tmp("tls");
  ASSERT_EQ(std::system(absl::StrCat("mkdir -p '", dir, "' && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "
                                     "/CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout '",
                                     dir, "/key.pem' -out '", dir, "/cert.pem' 2>/dev/null")
                            .c_str()),
            0);
  Serve tls({"--tls-cert=" + dir + "/cert.pem", "--tls-key=" + dir + "/key.pem"}, "tls-serve");
  ASSERT_TRUE(tls.ok());
  httplib::SSLClient client("127.0.0.1", tls.http_port());
  client.set_ca_cert_path((dir + "/cert.pem").c_str());
  client.enable_server_certificate_verification(true);
  auto r = client.Get("/v1/jobs", Auth());
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200) << r->body;
  // Plain HTTP to the HTTPS port gets no answer.
  auto plain = tls.Http().Get("/healthz");
  EXPECT_TRUE(!plain || plain->status != 200);
}

TEST(GatewayRetryTest, ResourceExhaustedBecomes429WithRetryAfter) {
  Serve full({"--max-queued=0"}, "full");
  ASSERT_TRUE(full.ok());
  auto r = full.Http().Post("/v1/jobs", Auth(), RegistrationSubmit("refused"), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 429) << r->body;
  EXPECT_EQ(r->get_header_value("Retry-After"), "2");
  const Json body = Json::parse(r->body);
  EXPECT_EQ(body["status"], "RESOURCE_EXHAUSTED");
  EXPECT_EQ(body["retryAfterMs"], 2000);
}

}  // namespace
}  // namespace tessera::gateway
