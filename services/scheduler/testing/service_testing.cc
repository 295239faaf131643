#include "services/scheduler/testing/service_testing.h"

#include <unistd.h>

#include <cstdlib>

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "absl/strings/str_cat.h"

namespace tessera::scheduler::testing {

std::string TmpDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::chrono::system_clock::time_point In(std::chrono::milliseconds ms) { return std::chrono::system_clock::now() + ms; }

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

ServerOptions LoopbackServerOptions() {
  ServerOptions options;
  options.grpc_port = 0;
  options.metrics_port = -1;
  options.device = "cpu";
  return options;
}

absl::StatusOr<LoopbackHost> StartLoopbackHost(const ServerOptions& options, grpc::Service* service) {
  LoopbackHost out;
  out.host = std::make_unique<ServiceHost>(options);
  out.host->AddService(service);
  absl::StatusOr<BoundPorts> ports = out.host->Start();
  if (!ports.ok()) return ports.status();
  out.channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", ports->grpc_port), grpc::InsecureChannelCredentials());
  return out;
}

}  // namespace tessera::scheduler::testing
