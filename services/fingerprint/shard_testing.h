// Tests of FingerprintShardRouter: services hosted on loopback TCP ports (what
// a router's channels reach), one-server and shard fixtures.
#ifndef TESSERA_SERVICES_FINGERPRINT_SHARD_TESTING_H_
#define TESSERA_SERVICES_FINGERPRINT_SHARD_TESTING_H_

#include <memory>
#include <string>
#include <utility>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <prometheus/registry.h>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/server/service_host.h"
#include "tessera/v1/fingerprint.grpc.pb.h"

namespace tessera {
namespace fingerprint {
namespace testing {

// A service hosted on a loopback TCP port chosen by the OS (real TCP: what a
// shard router's channels reach), with optional bearer tokens.
struct Hosted {
  std::unique_ptr<grpc::Service> service;
  std::unique_ptr<ServiceHost> host;
  int port = 0;
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
};

inline Hosted Host(std::unique_ptr<grpc::Service> service, const std::string& token_file = "") {
  ServerOptions options;
  options.token_file = token_file;
  options.grpc_port = 0;
  options.metrics_port = -1;
  Hosted h;
  h.service = std::move(service);
  h.host = std::make_unique<ServiceHost>(options);
  h.host->AddService(h.service.get());
  auto ports = h.host->Start();
  EXPECT_TRUE(ports.ok()) << ports.status();
  if (ports.ok()) h.port = ports->grpc_port;
  return h;
}

// A FingerprintService on the CPU with a temporary gallery (removed at exit).
inline Hosted HostFingerprintService() {
  ServerOptions server;
  server.device = "cpu";
  FingerprintServiceOptions options;
  options.metrics_registry = std::make_shared<prometheus::Registry>();
  auto service = FingerprintServiceImpl::Create(server, options);
  EXPECT_TRUE(service.ok()) << service.status();
  return Host(std::move(*service));
}

inline std::unique_ptr<v1::FingerprintService::Stub> StubTo(const Hosted& h) {
  return v1::FingerprintService::NewStub(grpc::CreateChannel(h.address(), grpc::InsecureChannelCredentials()));
}

}  // namespace testing
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SHARD_TESTING_H_
