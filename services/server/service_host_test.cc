// End-to-end tests of the server skeleton: an in-process ServiceHost on
// loopback (port 0) with the VolumeService, driven over real sockets.
#include "services/server/bearer_channel.h"
#include "services/server/service_host.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/http_get.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "services/volume/volume_service.h"
#include "tessera/testing/reflection_wire.pb.h"
#include "tessera/v1/volume.grpc.pb.h"

namespace tessera {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kMricronRoot[] = "/usr/share/mricron";
constexpr char kCh2[] = "/usr/share/mricron/templates/ch2.nii.gz";

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::chrono::system_clock::time_point In(std::chrono::milliseconds ms) { return std::chrono::system_clock::now() + ms; }

// A host with the VolumeService; tests tweak the options before Start().
class Server {
 public:
  explicit Server(ServerOptions options) : options_(std::move(options)) {}

  absl::Status Start() {
    absl::StatusOr<std::unique_ptr<VolumeServiceImpl>> volume = VolumeServiceImpl::Create(options_);
    if (!volume.ok()) return volume.status();
    volume_ = *std::move(volume);
    host_ = std::make_unique<ServiceHost>(options_);
    host_->AddService(volume_.get());
    absl::StatusOr<BoundPorts> ports = host_->Start();
    if (!ports.ok()) return ports.status();
    ports_ = *ports;
    return absl::OkStatus();
  }

  std::string target() const { return absl::StrCat("127.0.0.1:", ports_.grpc_port); }
  std::shared_ptr<grpc::Channel> Channel() const {
    return grpc::CreateChannel(target(), grpc::InsecureChannelCredentials());
  }
  ServiceHost& host() { return *host_; }
  const BoundPorts& ports() const { return ports_; }

 private:
  ServerOptions options_;
  std::unique_ptr<VolumeServiceImpl> volume_;
  std::unique_ptr<ServiceHost> host_;
  BoundPorts ports_;
};

ServerOptions TestOptions() {
  ServerOptions options;
  options.grpc_port = 0;
  options.metrics_port = 0;
  options.max_receive_message_bytes = 1 << 20;
  const std::string data = TmpDir() + "/data";
  mkdir(data.c_str(), 0755);
  options.data_roots = {data};
  if (access(kMricronRoot, F_OK) == 0) options.data_roots.push_back(kMricronRoot);
  return options;
}

// Health status of `service`, or the RPC's error code as a negative number.
int HealthStatus(const std::shared_ptr<grpc::Channel>& channel, const std::string& service) {
  grpc::ClientContext context;
  context.set_deadline(In(std::chrono::seconds(5)));
  HealthCheckRequest request;
  request.set_service(service);
  HealthCheckResponse response;
  grpc::Status status = Health::NewStub(channel)->Check(&context, request, &response);
  if (!status.ok()) return -static_cast<int>(status.error_code());
  return response.status();
}

constexpr int kServing = HealthCheckResponse::SERVING;
constexpr int kNotServing = HealthCheckResponse::NOT_SERVING;

// list_services over the reflection stream with a generic stub and the
// wire-compatible message copies.
absl::StatusOr<std::vector<std::string>> ListServices(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  context.set_deadline(In(std::chrono::seconds(10)));
  grpc::CompletionQueue cq;
  std::unique_ptr<grpc::GenericClientAsyncReaderWriter> call =
      stub.PrepareCall(&context, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  auto await = [&cq](intptr_t want) {
    void* tag = nullptr;
    bool ok = false;
    return cq.Next(&tag, &ok) && reinterpret_cast<intptr_t>(tag) == want && ok;
  };
  call->StartCall(reinterpret_cast<void*>(1));
  if (!await(1)) return absl::UnavailableError("StartCall failed");
  testing::reflection_wire::ServerReflectionRequest request;
  request.set_list_services("*");
  const std::string bytes = request.SerializeAsString();
  grpc::Slice slice(bytes);
  grpc::ByteBuffer out(&slice, 1);
  call->Write(out, reinterpret_cast<void*>(2));
  if (!await(2)) return absl::UnavailableError("Write failed");
  call->WritesDone(reinterpret_cast<void*>(3));
  if (!await(3)) return absl::UnavailableError("WritesDone failed");
  grpc::ByteBuffer in;
  call->Read(&in, reinterpret_cast<void*>(4));
  if (!await(4)) return absl::UnavailableError("Read failed");
  grpc::Status status;
  call->Finish(&status, reinterpret_cast<void*>(5));
  await(5);
  cq.Shutdown();
  void* tag;
  bool ok;
  while (cq.Next(&tag, &ok)) {
  }
  if (!status.ok()) return absl::UnknownError(status.error_message());
  std::vector<grpc::Slice> slices;
  if (!in.Dump(&slices).ok()) return absl::DataLossError("cannot read the response");
  std::string data;
  for (const grpc::Slice& s : slices) data.append(reinterpret_cast<const char*>(s.begin()), s.size());
  testing::reflection_wire::ServerReflectionResponse response;
  if (!response.ParseFromString(data)) return absl::DataLossError("unparsable reflection response");
  std::vector<std::string> names;
  for (const auto& service : response.list_services_response().service()) names.push_back(service.name());
  return names;
}

// The /metrics line of `family` whose labels include all of `labels`, or "".
std::string MetricLine(const std::string& text, const std::string& family, const std::vector<std::string>& labels) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, family + "{")) continue;
    bool all = true;
    for (const std::string& label : labels) all = all && absl::StrContains(line, label);
    if (all) return std::string(line);
  }
  return "";
}

std::string ScrapeMetrics(int port) {
  absl::StatusOr<HttpResponse> response = HttpGet("127.0.0.1", port, "/metrics");
  if (!response.ok() || response->status_code != 200) return "";
  return response->body;
}

// Polls /metrics until `method` has `count` calls in flight (up to 5 s).
bool WaitForInFlight(int metrics_port, const std::string& method, int count) {
  const std::string want = absl::StrCat("} ", count);
  for (int i = 0; i < 250; ++i) {
    const std::string line = MetricLine(ScrapeMetrics(metrics_port), "tessera_grpc_server_in_flight",
                                        {absl::StrCat("grpc_method=\"", method, "\"")});
    if (absl::EndsWith(line, want)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

grpc::Status DescribeFile(const std::shared_ptr<grpc::Channel>& channel, const std::string& path,
                          v1::VolumeSummary* summary) {
  grpc::ClientContext context;
  context.set_deadline(In(std::chrono::seconds(60)));
  v1::DescribeFileRequest request;
  request.set_path(path);
  return v1::VolumeService::NewStub(channel)->DescribeFile(&context, request, summary);
}

v1::ArrayChunk HeaderChunk(std::vector<int64_t> dims) {
  v1::ArrayChunk chunk;
  for (int64_t d : dims) chunk.mutable_header()->add_dims(d);
  chunk.mutable_header()->set_dtype(v1::DTYPE_UINT8);
  return chunk;
}

v1::ArrayChunk DataChunk(int64_t offset, size_t size) {
  v1::ArrayChunk chunk;
  chunk.set_offset(offset);
  chunk.set_data(std::string(size, '\x7'));
  return chunk;
}

class ServiceHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = std::make_unique<Server>(TestOptions());
    absl::Status status = server_->Start();
    ASSERT_TRUE(status.ok()) << status;
    channel_ = server_->Channel();
  }

  std::unique_ptr<Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(ServiceHostTest, StartReportsChosenPorts) {
  EXPECT_GT(server_->ports().grpc_port, 0);
  EXPECT_GT(server_->ports().metrics_port, 0);
  EXPECT_NE(server_->ports().grpc_port, server_->ports().metrics_port);
  EXPECT_THAT(server_->host().service_names(), Contains("tessera.v1.VolumeService"));
  EXPECT_EQ(server_->host().Start().status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(ServiceHostTest, HealthIsServing) {
  EXPECT_EQ(HealthStatus(channel_, ""), kServing);
  EXPECT_EQ(HealthStatus(channel_, "liveness"), kServing);
  EXPECT_EQ(HealthStatus(channel_, "readiness"), kServing);
  EXPECT_EQ(HealthStatus(channel_, "tessera.v1.VolumeService"), kServing);
  EXPECT_EQ(HealthStatus(channel_, "no.such.Service"), -grpc::StatusCode::NOT_FOUND);

  server_->host().SetReady(false);
  EXPECT_EQ(HealthStatus(channel_, "readiness"), kNotServing);
  EXPECT_EQ(HealthStatus(channel_, "liveness"), kServing);
  server_->host().SetReady(true);
  EXPECT_EQ(HealthStatus(channel_, "readiness"), kServing);
}

TEST_F(ServiceHostTest, ReflectionListsServices) {
  absl::StatusOr<std::vector<std::string>> names = ListServices(channel_);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, Contains("tessera.v1.VolumeService"));
  EXPECT_THAT(*names, Contains("grpc.health.v1.Health"));
  EXPECT_THAT(*names, Contains("grpc.channelz.v1.Channelz"));
  EXPECT_THAT(*names, Contains("grpc.reflection.v1alpha.ServerReflection"));
}

// Secure mode (a token file): reflection is not served unless asked for.
TEST(ServiceHostSecureModeTest, ReflectionIsOffUnlessAskedFor) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string tokens = std::string(base ? base : "/tmp") + "/secure-mode-tokens";
  std::ofstream(tokens) << "0123456789abcdef0123456789abcdef alice reader\n";
  for (const bool asked : {false, true}) {
    ServerOptions options;
    options.grpc_port = 0;
    options.metrics_port = -1;
    options.token_file = tokens;
    options.introspection_in_secure_mode = asked;
    auto volume = VolumeServiceImpl::Create(options);
    ASSERT_TRUE(volume.ok());
    ServiceHost host(options);
    host.AddService(volume->get());
    auto ports = host.Start();
    ASSERT_TRUE(ports.ok()) << ports.status();
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", ports->grpc_port),
                                       grpc::InsecureChannelCredentials());
    absl::StatusOr<std::vector<std::string>> names = ListServices(channel);
    if (asked) {
      ASSERT_TRUE(names.ok()) << names.status();
      EXPECT_THAT(*names, Contains("grpc.reflection.v1alpha.ServerReflection"));
    } else {
      EXPECT_FALSE(names.ok());
    }
    host.Drain();
  }
}

TEST_F(ServiceHostTest, MetricsCountRequestsByMethodAndCode) {
  v1::VolumeSummary summary;
  EXPECT_EQ(DescribeFile(channel_, "/etc/passwd", &summary).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(HealthStatus(channel_, "readiness"), kServing);

  absl::StatusOr<HttpResponse> response = HttpGet("127.0.0.1", server_->ports().metrics_port, "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status_code, 200);
  EXPECT_THAT(response->headers, HasSubstr("text/plain"));
  const std::string& text = response->body;
  EXPECT_THAT(text, HasSubstr("# TYPE tessera_grpc_server_handled_total counter"));
  EXPECT_NE(MetricLine(text, "tessera_grpc_server_handled_total",
                       {"grpc_code=\"PERMISSION_DENIED\"", "grpc_method=\"DescribeFile\"",
                        "grpc_service=\"tessera.v1.VolumeService\""}),
            "")
      << text;
  EXPECT_NE(MetricLine(text, "tessera_grpc_server_handled_total",
                       {"grpc_code=\"OK\"", "grpc_method=\"Check\"", "grpc_service=\"grpc.health.v1.Health\""}),
            "");
  EXPECT_NE(MetricLine(text, "tessera_grpc_server_handling_seconds_count", {"grpc_method=\"DescribeFile\""}), "");
  EXPECT_NE(MetricLine(text, "tessera_grpc_server_in_flight", {"grpc_method=\"DescribeFile\""}), "");
  // Finished calls leave the in-flight gauges (server-side cleanup may trail
  // the client's receipt of the status by a moment).
  EXPECT_TRUE(WaitForInFlight(server_->ports().metrics_port, "DescribeFile", 0));
  EXPECT_TRUE(WaitForInFlight(server_->ports().metrics_port, "Check", 0));
  // GPU memory gauges are refreshed on scrape; without a GPU they have no
  // samples (and prometheus-cpp omits families without samples).
  if (!DeviceRegistry::Get().cuda_available()) {
    EXPECT_EQ(MetricLine(text, "tessera_gpu_memory_used_bytes", {}), "");
  } else {
    EXPECT_NE(MetricLine(text, "tessera_gpu_memory_used_bytes", {"gpu=\"0\""}), "");
  }
}

TEST_F(ServiceHostTest, UnknownMethodsDoNotCreateMetricSeries) {
  for (const char* method : {"/no.such.Service/Method", "/tessera.v1.VolumeService/NoSuchMethod"}) {
    grpc::GenericStub stub(channel_);
    grpc::ClientContext context;
    context.set_deadline(In(std::chrono::seconds(5)));
    grpc::CompletionQueue cq;
    grpc::Slice slice(std::string("x"));
    grpc::ByteBuffer request(&slice, 1);
    std::unique_ptr<grpc::GenericClientAsyncResponseReader> call =
        stub.PrepareUnaryCall(&context, method, request, &cq);
    call->StartCall();
    grpc::ByteBuffer response;
    grpc::Status status;
    call->Finish(&response, &status, reinterpret_cast<void*>(1));
    void* tag;
    bool ok;
    ASSERT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNIMPLEMENTED) << method;
    cq.Shutdown();
    while (cq.Next(&tag, &ok)) {
    }
  }
  const std::string text = ScrapeMetrics(server_->ports().metrics_port);
  EXPECT_THAT(text, Not(HasSubstr("no.such.Service"))) << text;
  EXPECT_THAT(text, Not(HasSubstr("NoSuchMethod"))) << text;
  EXPECT_NE(MetricLine(text, "tessera_grpc_server_handled_total",
                       {"grpc_code=\"UNIMPLEMENTED\"", "grpc_method=\"unknown\"", "grpc_service=\"unknown\""}),
            "")
      << text;
}

TEST_F(ServiceHostTest, DescribeFileOnTheMricronTemplate) {
  if (access(kCh2, R_OK) != 0) GTEST_SKIP() << kCh2 << " not installed (apt-get install mricron-data)";
  v1::VolumeSummary summary;
  grpc::Status status = DescribeFile(channel_, kCh2, &summary);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_THAT(summary.header().dims(), ::testing::ElementsAre(181, 217, 181));
  EXPECT_EQ(summary.voxel_count(), int64_t{181} * 217 * 181);
  EXPECT_EQ(summary.nonfinite_count(), 0);
  EXPECT_GE(summary.min(), 0);
  EXPECT_GT(summary.max(), summary.min());
  EXPECT_GT(summary.mean(), summary.min());
  EXPECT_LT(summary.mean(), summary.max());
  EXPECT_GT(summary.stddev(), 0);
  EXPECT_EQ(summary.orientation().size(), 3u);
  EXPECT_EQ(summary.affine_size(), 16);
  EXPECT_EQ(summary.format(), "NIfTI-1");
  ASSERT_EQ(summary.header().spacing_size(), 3);
  EXPECT_NEAR(summary.header().spacing(0), 1.0, 1e-3);  // the 1 mm MNI template
  EXPECT_EQ(summary.backend(), DeviceRegistry::Get().cuda_available() ? "cuda" : "cpu");

  EXPECT_EQ(DescribeFile(channel_, "/etc/hostname", &summary).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(DescribeFile(channel_, "/usr/share/mricron/templates/nope.nii.gz", &summary).error_code(),
            grpc::StatusCode::NOT_FOUND);
}

TEST_F(ServiceHostTest, SlowStreamPastItsDeadlineIsDeadlineExceeded) {
  v1::VolumeSummary summary;
  grpc::ClientContext context;
  context.set_deadline(In(std::chrono::milliseconds(400)));
  std::unique_ptr<grpc::ClientWriter<v1::ArrayChunk>> writer =
      v1::VolumeService::NewStub(channel_)->DescribeStream(&context, &summary);
  ASSERT_TRUE(writer->Write(HeaderChunk({64, 64, 64})));
  for (int i = 0; i < 20; ++i) {  // 20 x 100 ms: far past the deadline
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!writer->Write(DataChunk(i * 1024, 1024))) break;
  }
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED) << status.error_message();

  // The handler noticed (IsCancelled) and returned; the server recorded it.
  std::string line, text;
  for (int i = 0; i < 50 && line.empty(); ++i) {
    text = ScrapeMetrics(server_->ports().metrics_port);
    line = MetricLine(text, "tessera_grpc_server_handled_total",
                      {"grpc_code=\"DEADLINE_EXCEEDED\"", "grpc_method=\"DescribeStream\""});
    if (line.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_NE(line, "") << text;
}

TEST_F(ServiceHostTest, MessageOverTheLimitIsResourceExhausted) {
  v1::VolumeSummary summary;
  grpc::ClientContext context;
  context.set_deadline(In(std::chrono::seconds(10)));
  std::unique_ptr<grpc::ClientWriter<v1::ArrayChunk>> writer =
      v1::VolumeService::NewStub(channel_)->DescribeStream(&context, &summary);
  v1::ArrayChunk chunk = HeaderChunk({2 << 20});
  chunk.set_data(std::string(2 << 20, 'x'));  // one 2 MiB message; the limit is 1 MiB
  writer->Write(chunk);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << status.error_message();

  // The same volume in 512 KiB chunks is fine.
  v1::VolumeSummary ok_summary;
  grpc::ClientContext ok_context;
  ok_context.set_deadline(In(std::chrono::seconds(10)));
  writer = v1::VolumeService::NewStub(channel_)->DescribeStream(&ok_context, &ok_summary);
  ASSERT_TRUE(writer->Write(HeaderChunk({2 << 20})));
  for (int64_t offset = 0; offset < (2 << 20); offset += 512 << 10) ASSERT_TRUE(writer->Write(DataChunk(offset, 512 << 10)));
  writer->WritesDone();
  status = writer->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(ok_summary.voxel_count(), 2 << 20);
  EXPECT_EQ(ok_summary.max(), 7);
}

TEST(ServiceHostStartTest, PortsInUseAreUnavailable) {
  Server first(TestOptions());
  ASSERT_TRUE(first.Start().ok());
  ServerOptions clash_grpc = TestOptions();
  clash_grpc.grpc_port = first.ports().grpc_port;
  absl::Status status = Server(clash_grpc).Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  ServerOptions clash_metrics = TestOptions();
  clash_metrics.metrics_port = first.ports().metrics_port;
  status = Server(clash_metrics).Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  // The first server is unaffected.
  EXPECT_EQ(HealthStatus(first.Channel(), "readiness"), kServing);
}

TEST(ServiceHostStartTest, BadOptions) {
  ServerOptions options = TestOptions();
  options.tls_key = "/nonexistent/key.pem";
  EXPECT_EQ(ServiceHost(options).Start().status().code(), absl::StatusCode::kInvalidArgument);
  options.tls_cert = "/nonexistent/cert.pem";
  EXPECT_EQ(ServiceHost(options).Start().status().code(), absl::StatusCode::kNotFound);
  options = TestOptions();
  options.tls_client_ca = "/nonexistent/ca.pem";
  EXPECT_EQ(ServiceHost(options).Start().status().code(), absl::StatusCode::kInvalidArgument);
  options = TestOptions();
  options.grpc_port = 70000;
  EXPECT_EQ(ServiceHost(options).Start().status().code(), absl::StatusCode::kInvalidArgument);
  options = TestOptions();
  const std::string not_pem = TmpDir() + "/not.pem";
  std::ofstream(not_pem) << "hello";
  options.tls_cert = options.tls_key = not_pem;
  EXPECT_EQ(ServiceHost(options).Start().status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServiceHostDrainTest, DrainTurnsReadinessOffFinishesCallsInFlightThenStops) {
  ServerOptions options = TestOptions();
  options.drain_grace = absl::Milliseconds(1500);
  options.drain_timeout = absl::Seconds(20);
  Server server(options);
  ASSERT_TRUE(server.Start().ok());
  std::shared_ptr<grpc::Channel> channel = server.Channel();
  ASSERT_EQ(HealthStatus(channel, "readiness"), kServing);

  // A call in flight when the drain starts...
  v1::VolumeSummary summary;
  grpc::ClientContext context;
  context.set_deadline(In(std::chrono::seconds(30)));
  std::unique_ptr<grpc::ClientWriter<v1::ArrayChunk>> writer =
      v1::VolumeService::NewStub(channel)->DescribeStream(&context, &summary);
  ASSERT_TRUE(writer->Write(HeaderChunk({4096})));
  ASSERT_TRUE(writer->Write(DataChunk(0, 1024)));
  ASSERT_TRUE(WaitForInFlight(server.ports().metrics_port, "DescribeStream", 1));

  std::thread drain([&] { server.host().Drain(); });
  // ...during the grace period readiness is NOT_SERVING, liveness still SERVING.
  int readiness = kServing;
  for (int i = 0; i < 50 && readiness == kServing; ++i) {
    readiness = HealthStatus(channel, "readiness");
    if (readiness == kServing) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(readiness, kNotServing);
  EXPECT_EQ(HealthStatus(channel, "liveness"), kServing);
  EXPECT_EQ(HealthStatus(channel, ""), kNotServing);
  EXPECT_EQ(HealthStatus(channel, "tessera.v1.VolumeService"), kNotServing);

  // ...and the call in flight still completes, after the grace period.
  std::this_thread::sleep_for(std::chrono::milliseconds(1700));
  for (int64_t offset = 1024; offset < 4096; offset += 1024) ASSERT_TRUE(writer->Write(DataChunk(offset, 1024)));
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(summary.voxel_count(), 4096);

  drain.join();
  server.host().Wait();
  // Stopped: new calls fail.
  EXPECT_EQ(HealthStatus(grpc::CreateChannel(server.target(), grpc::InsecureChannelCredentials()), "readiness"),
            -grpc::StatusCode::UNAVAILABLE);
  server.host().Drain();  // idempotent
}

TEST(ServiceHostDrainTest, DrainCancelsCallsStillRunningAtTheTimeout) {
  ServerOptions options = TestOptions();
  options.drain_timeout = absl::Milliseconds(500);
  Server server(options);
  ASSERT_TRUE(server.Start().ok());
  v1::VolumeSummary summary;
  grpc::ClientContext context;
  context.set_deadline(In(std::chrono::seconds(60)));
  std::unique_ptr<grpc::ClientWriter<v1::ArrayChunk>> writer =
      v1::VolumeService::NewStub(server.Channel())->DescribeStream(&context, &summary);
  ASSERT_TRUE(writer->Write(HeaderChunk({4096})));  // and then nothing more
  // Wait until the server is handling the call (calls not yet matched to a
  // handler are simply refused at shutdown).
  ASSERT_TRUE(WaitForInFlight(server.ports().metrics_port, "DescribeStream", 1));

  const absl::Time start = absl::Now();
  server.host().Drain();
  const absl::Duration took = absl::Now() - start;
  EXPECT_GE(took, absl::Milliseconds(400));
  EXPECT_LT(took, absl::Seconds(10));
  grpc::Status status = writer->Finish();
  EXPECT_FALSE(status.ok());
}

TEST(ServiceHostSignalTest, SigtermDrains) {
  ServiceHost::InstallShutdownSignalHandlers();
  Server server(TestOptions());
  ASSERT_TRUE(server.Start().ok());
  int received = -1;
  std::thread waiter([&] { received = server.host().WaitForShutdownSignal(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  waiter.join();
  EXPECT_EQ(received, SIGTERM);
  server.host().Wait();
  EXPECT_EQ(HealthStatus(server.Channel(), "readiness"), -grpc::StatusCode::UNAVAILABLE);
  // WaitForShutdownSignal restored the default action for a second signal.
  struct sigaction action;
  ASSERT_EQ(sigaction(SIGTERM, nullptr, &action), 0);
  EXPECT_EQ(action.sa_handler, SIG_DFL);
}

TEST(ServiceHostSignalTest, WaitReturnsWhenDrainedOtherwise) {
  Server server(TestOptions());
  ASSERT_TRUE(server.Start().ok());
  int received = -1;
  std::thread waiter([&] { received = server.host().WaitForShutdownSignal(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  server.host().Drain();
  waiter.join();
  EXPECT_EQ(received, 0);
  // Leave the handlers as the default for the rest of the test binary.
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
}

// --- TLS ---------------------------------------------------------------------

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(TmpDir() + "/tls");
    const std::string script = absl::StrCat(
        "set -e; mkdir -p '", *dir_, "'; cd '", *dir_, "';",
        "K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';",
        "openssl req -x509 $K -keyout ca.key -out ca.pem -days 2 -subj '/CN=Tessera Test CA';",
        "openssl req $K -keyout server.key -out server.csr -subj '/CN=localhost';",
        "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nbasicConstraints=CA:FALSE\\n"
        "extendedKeyUsage=serverAuth\\n' > server.ext;",
        "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem -days 2 "
        "-extfile server.ext;",
        "openssl req $K -keyout client.key -out client.csr -subj '/CN=tessera-client';",
        "printf 'basicConstraints=CA:FALSE\\nextendedKeyUsage=clientAuth\\n' > client.ext;",
        "openssl x509 -req -in client.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out client.pem -days 2 "
        "-extfile client.ext;",
        // A second CA whose client certificate the server must refuse.
        "openssl req -x509 $K -keyout other-ca.key -out other-ca.pem -days 2 -subj '/CN=Other CA';",
        "openssl req $K -keyout other.key -out other.csr -subj '/CN=intruder';",
        "openssl x509 -req -in other.csr -CA other-ca.pem -CAkey other-ca.key -CAcreateserial -out other.pem "
        "-days 2 -extfile client.ext");
    openssl_ok_ = std::system(absl::StrCat("(", script, ") > '", TmpDir(), "/openssl.log' 2>&1").c_str()) == 0;
  }

  void SetUp() override {
    if (!openssl_ok_) {
      if (std::system("command -v openssl > /dev/null") != 0) GTEST_SKIP() << "no openssl CLI";
      FAIL() << "openssl failed: " << ReadFile(TmpDir() + "/openssl.log");
    }
  }

  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }

  static std::shared_ptr<grpc::Channel> TlsChannel(const std::string& target, const std::string& cert,
                                                   const std::string& key) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = ReadFile(Path("ca.pem"));
    if (!cert.empty()) {
      ssl.pem_cert_chain = ReadFile(Path(cert));
      ssl.pem_private_key = ReadFile(Path(key));
    }
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    return grpc::CreateCustomChannel(target, grpc::SslCredentials(ssl), args);
  }

  static std::string* dir_;
  static bool openssl_ok_;
};

std::string* TlsTest::dir_ = nullptr;
bool TlsTest::openssl_ok_ = false;

// What clients (tessera job) use: ClientCredentials from PEM files.
TEST_F(TlsTest, ClientCredentialsFromFiles) {
  ServerOptions options = TestOptions();
  options.tls_cert = Path("server.pem");
  options.tls_key = Path("server.key");
  options.tls_client_ca = Path("ca.pem");
  Server server(options);
  ASSERT_TRUE(server.Start().ok());
  auto mutual = ClientCredentials({Path("ca.pem"), Path("client.pem"), Path("client.key")});
  ASSERT_TRUE(mutual.ok()) << mutual.status();
  EXPECT_EQ(HealthStatus(CreateBearerChannel(server.target(), *mutual, grpc::ChannelArguments(), ""), "readiness"),
            kServing);
  auto no_client_cert = ClientCredentials({Path("ca.pem"), "", ""});
  ASSERT_TRUE(no_client_cert.ok());
  EXPECT_EQ(HealthStatus(CreateBearerChannel(server.target(), *no_client_cert, grpc::ChannelArguments(), ""),
                         "readiness"),
            -grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(ClientCredentials({Path("ca.pem"), Path("client.pem"), ""}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClientCredentials({"", Path("client.pem"), Path("client.key")}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClientCredentials({Path("missing.pem"), "", ""}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ClientCredentials({Path("server.csr.nope"), "", ""}).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TlsTest, MutualTlsRequiresAClientCertificateFromTheCa) {
  ServerOptions options = TestOptions();
  options.tls_cert = Path("server.pem");
  options.tls_key = Path("server.key");
  options.tls_client_ca = Path("ca.pem");
  Server server(options);
  absl::Status started = server.Start();
  ASSERT_TRUE(started.ok()) << started;

  EXPECT_EQ(HealthStatus(TlsChannel(server.target(), "client.pem", "client.key"), "readiness"), kServing);
  EXPECT_EQ(HealthStatus(TlsChannel(server.target(), "", ""), "readiness"), -grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(HealthStatus(TlsChannel(server.target(), "other.pem", "other.key"), "readiness"),
            -grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(HealthStatus(server.Channel(), "readiness"), -grpc::StatusCode::UNAVAILABLE);  // plaintext
}

TEST_F(TlsTest, ServerSideTls) {
  ServerOptions options = TestOptions();
  options.tls_cert = Path("server.pem");
  options.tls_key = Path("server.key");
  Server server(options);
  absl::Status started = server.Start();
  ASSERT_TRUE(started.ok()) << started;
  EXPECT_EQ(HealthStatus(TlsChannel(server.target(), "", ""), "readiness"), kServing);
  EXPECT_EQ(HealthStatus(server.Channel(), "readiness"), -grpc::StatusCode::UNAVAILABLE);  // plaintext
  // A client that does not trust the server's CA is refused.
  grpc::SslCredentialsOptions other;
  other.pem_root_certs = ReadFile(Path("other-ca.pem"));
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  EXPECT_EQ(HealthStatus(grpc::CreateCustomChannel(server.target(), grpc::SslCredentials(other), args), "readiness"),
            -grpc::StatusCode::UNAVAILABLE);
}

}  // namespace
}  // namespace tessera
