// End-to-end tests of the `tessera` binary as users run it: `serve` as a real
// process on loopback (ports picked by the OS, health over gRPC, /metrics over
// HTTP, graceful exit on SIGTERM), bad flags, and the whole `demo`.
#include <fcntl.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/http_get.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "tests/process_testing.h"


namespace tessera {
namespace {

using testing::Child;
using testing::PortFrom;
using testing::TempDir;
using testing::TesseraBinary;


TEST(ServeProcess, PicksPortsServesHealthAndMetricsAndDrainsOnSigterm) {
  Child serve({"serve", "--grpc-port=0", "--metrics-port=0", "--data-root=" + TempDir(), "--drain-timeout-s=5"});
  const int grpc_port = PortFrom(serve.ReadLine(), "grpc_port");
  const int metrics_port = PortFrom(serve.ReadLine(), "metrics_port");
  ASSERT_GT(grpc_port, 0);
  ASSERT_GT(metrics_port, 0);

  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port), grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  for (const char* name : {"", "liveness", "readiness", "tessera.v1.VolumeService"}) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(name);
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status status = health->Check(&context, request, &response);
    ASSERT_TRUE(status.ok()) << name << ": " << status.error_message();
    EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING) << name;
  }
  auto metrics = HttpGet("127.0.0.1", metrics_port, "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_EQ(metrics->status_code, 200);
  EXPECT_TRUE(absl::StrContains(metrics->body, "tessera_grpc_server_handled_total")) << metrics->body;

  ASSERT_EQ(kill(serve.pid(), SIGTERM), 0);
  EXPECT_EQ(serve.WaitExit(std::chrono::seconds(20)), 0) << "serve did not exit cleanly after SIGTERM";
}

TEST(ServeProcess, RejectsBadFlagsWithUsage) {
  Child bad_port({"serve", "--grpc-port=not-a-number"});
  EXPECT_EQ(bad_port.WaitExit(std::chrono::seconds(20)), 2);
  Child unknown({"serve", "--no-such-flag=1"});
  EXPECT_EQ(unknown.WaitExit(std::chrono::seconds(20)), 2);
  Child unknown_service({"serve", "--grpc-port=0", "--metrics-port=0", "--services=volume,nope"});
  EXPECT_EQ(unknown_service.WaitExit(std::chrono::seconds(20)), 2);
  Child tls_half({"serve", "--grpc-port=0", "--metrics-port=0", "--tls-key=/nonexistent.pem"});
  EXPECT_NE(tls_half.WaitExit(std::chrono::seconds(20)), 0);
}

TEST(ServeProcess, HostsOnlyTheServicesAsked) {
  Child serve({"serve", "--grpc-port=0", "--metrics-port=0", "--services=volume", "--data-root=" + TempDir()});
  const int grpc_port = PortFrom(serve.ReadLine(), "grpc_port");
  PortFrom(serve.ReadLine(), "metrics_port");
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", grpc_port), grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  for (const auto& [name, hosted] : {std::pair<const char*, bool>{"tessera.v1.VolumeService", true},
                                     {"tessera.v1.RegistrationService", false}}) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(name);
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status status = health->Check(&context, request, &response);
    if (hosted) {
      EXPECT_TRUE(status.ok()) << name << ": " << status.error_message();
    } else {
      EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << name;
    }
  }
  ASSERT_EQ(kill(serve.pid(), SIGTERM), 0);
  EXPECT_EQ(serve.WaitExit(std::chrono::seconds(20)), 0);
}

TEST(DemoProcess, RunsToTheEndAndWritesOutputs) {
  const std::string out = TempDir() + "/demo-out";
  // The synthetic SOM corpus: a test must not download (the genes x GO path
  // has its own offline test, tools/som_data:genes_go_cache_test).
  Child demo({"demo", "--out=" + out, "--som-corpus=synthetic"});
  const std::string stdout_text = demo.ReadAll();
  ASSERT_EQ(demo.WaitExit(std::chrono::seconds(300)), 0) << stdout_text;
  EXPECT_TRUE(absl::StrContains(stdout_text, "liveness=SERVING")) << stdout_text;
  EXPECT_TRUE(absl::StrContains(stdout_text, "181x217x181")) << stdout_text;
  std::ifstream summary(out + "/summary.json");
  std::stringstream text;
  text << summary.rdbuf();
  EXPECT_TRUE(absl::StrContains(text.str(), "\"voxel_count\": \"7109137\"") ||
              absl::StrContains(text.str(), "\"voxel_count\":\"7109137\""))
      << text.str();
  struct stat st;
  ASSERT_EQ(stat((out + "/volume_preview.png").c_str(), &st), 0);
  EXPECT_GT(st.st_size, 1000);
}

}  // namespace
}  // namespace tessera
