// Shared state of `tessera demo`: the running in-process server, a real gRPC
// channel to it over loopback, the output directory and the summary that ends
// up in demo-out/summary.json. Each service contributes a step function.
#ifndef TESSERA_CLI_DEMO_CONTEXT_H_
#define TESSERA_CLI_DEMO_CONTEXT_H_

#include <chrono>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/channel.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "services/server/service_host.h"

namespace tessera::cli {

struct DemoContext {
  std::shared_ptr<grpc::Channel> channel;
  BoundPorts ports;
  std::string out_dir;       // e.g. "demo-out"
  std::string volume_path;   // the real brain volume the steps use
  std::string device;        // "auto", "cpu" or "cuda"
  std::string som_corpus = "genes-go";  // or "synthetic" (--som-corpus)
  // (key, JSON value) pairs written in order to summary.json.
  std::vector<std::pair<std::string, std::string>> summary;

  std::string OutPath(const std::string& name) const { return out_dir + "/" + name; }
  // mkdir -p for one level; OK when it exists.
  static absl::Status EnsureDir(const std::string& dir);
  // Deadline for one demo RPC.
  static absl::Duration RpcTimeout() { return absl::Minutes(10); }
  // RpcTimeout from now, as grpc::ClientContext::set_deadline takes it.
  static std::chrono::system_clock::time_point RpcDeadline() {
    return std::chrono::system_clock::now() + absl::ToChronoMilliseconds(RpcTimeout());
  }
};

// A step prints its own lines and adds to ctx.summary; an error ends the demo.
absl::Status DemoHealthStep(DemoContext& ctx);
absl::Status DemoVolumeStep(DemoContext& ctx);
absl::Status DemoRegistrationStep(DemoContext& ctx);  // demo_registration_step.cc
absl::Status DemoSomStep(DemoContext& ctx);           // demo_som_step.cc
absl::Status DemoFingerprintStep(DemoContext& ctx);   // demo_fingerprint_step.cc
absl::Status DemoReconstructionStep(DemoContext& ctx);  // demo_recon_step.cc
absl::Status DemoMetricsStep(DemoContext& ctx);


}  // namespace tessera::cli

#endif  // TESSERA_CLI_DEMO_CONTEXT_H_
