// The modules a serving process hosts (`tessera serve`, `tessera demo`,
// tests), created from one set of ModuleOptions: the parts that do not depend
// on the scheduler (which is made afterwards, from the modules' engines:
// CreateHostedScheduler). Declare HostedServices before the HostedScheduler
// and the ServiceHost, so it is destroyed after them.
#ifndef TESSERA_CLI_HOSTED_SERVICES_H_
#define TESSERA_CLI_HOSTED_SERVICES_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/module.h"
#include "services/jobs/engine.h"
#include "services/server/bearer_channel.h"
#include "services/server/hosted_module.h"
#include "services/server/service_host.h"

namespace tessera::cli {

struct HostedServices {
  // (module name, module), in the module list's order.
  std::vector<std::pair<std::string, std::unique_ptr<HostedModule>>> modules;

  // Registers every module's gRPC services with `host` (before host.Start()).
  void AddTo(ServiceHost& host);
  // Every module's engines (workers and the scheduler's checks at submit).
  absl::Status AddEngines(const std::string& state_dir, jobs::EngineRegistry& engines);
  // Points every module's job RPCs at `scheduler`.
  absl::Status AttachScheduler(scheduler::Scheduler& scheduler, const std::string& state_dir);
  bool Hosts(const std::string& name) const;
};

// The names of `modules`, in hosting order (what --services accepts).
std::vector<std::string> ModuleNames(const std::vector<ModuleEntry>& modules);

// Creates the modules of `modules` named in `names` (all when empty); an
// unknown name is INVALID_ARGUMENT listing the known ones. One binary can so
// run every service, or one per Kubernetes Deployment.
absl::StatusOr<HostedServices> CreateHostedServices(const std::vector<ModuleEntry>& modules,
                                                    const ModuleOptions& options,
                                                    const std::vector<std::string>& names = {});

// Adds a FingerprintService routing over the FingerprintService servers at
// `shards` (HOST:PORT; their order is part of the routing: keep it fixed).
// INVALID_ARGUMENT for a bad or repeated address; FAILED_PRECONDITION when
// `services` already hosts a FingerprintService of its own.
absl::Status AttachFingerprintRouter(HostedServices& services, const ServerOptions& options,
                                     const std::vector<std::string>& shards, const PeerChannelSecurity& peer = {},
                                     const fingerprint::ImageLimits& image = {});

}  // namespace tessera::cli

#endif  // TESSERA_CLI_HOSTED_SERVICES_H_
