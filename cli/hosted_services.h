// Every service `tessera serve` and `tessera demo` host, created from one set
// of ServerOptions: the parts that do not depend on the scheduler (which is
// made afterwards, from the services' engines: CreateHostedScheduler). Declare
// HostedServices before the HostedScheduler and the ServiceHost, so it is
// destroyed after them. A new service adds a member and two lines in the .cc.
#ifndef TESSERA_CLI_HOSTED_SERVICES_H_
#define TESSERA_CLI_HOSTED_SERVICES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/fingerprint/shard_router.h"
#include "services/reconstruction/reconstruction_service.h"
#include "services/registration/registration_service.h"
#include "services/server/bearer_channel.h"
#include "services/server/server_options.h"
#include "services/server/service_host.h"
#include "services/som/som_service.h"
#include "services/volume/volume_service.h"

namespace tessera::cli {

struct HostedServices {
  std::unique_ptr<VolumeServiceImpl> volume;
  // A gRPC adapter over the scheduler, which CreateHostedScheduler
  // (cli/scheduler_host.h) attaches; its jobs are the scheduler's.
  std::unique_ptr<RegistrationServiceImpl> registration;
  std::unique_ptr<FingerprintServiceImpl> fingerprint;  // its gallery directory: FingerprintServiceOptions
  std::unique_ptr<SomAtlasServiceImpl> som;  // "som": SOM atlases (cancels its jobs too)
  // CT/PET reconstruction: an adapter over the scheduler, like registration.
  std::unique_ptr<ReconstructionServiceImpl> reconstruction;
  // The FingerprintService of a scheduler given --fp-shard: no gallery of its
  // own, a router over the shard servers (shard_router.h). Never with `fingerprint`.
  std::unique_ptr<FingerprintShardRouter> fingerprint_router;

  // Registers every service with `host` (before host.Start()).
  void AddTo(ServiceHost& host);
};

// The names `--services` accepts, in hosting order.
const std::vector<std::string>& HostableServiceNames();  // {"volume", "registration", "fingerprint", "som", "reconstruction"}

// Creates the services named in `names` (all when empty); an unknown name is
// INVALID_ARGUMENT listing the known ones. One binary can so run every
// service, or one per Kubernetes Deployment.
absl::StatusOr<HostedServices> CreateHostedServices(const ServerOptions& options,
                                                    const std::vector<std::string>& names = {},
                                                    const FingerprintServiceOptions& fingerprint = {});

// Makes services.fingerprint_router over the FingerprintService servers at
// `shards` (HOST:PORT; their order is part of the routing: keep it fixed).
// INVALID_ARGUMENT for a bad or repeated address; FAILED_PRECONDITION when
// `services` already hosts a FingerprintService of its own.
absl::Status AttachFingerprintRouter(HostedServices& services, const ServerOptions& options,
                                     const std::vector<std::string>& shards, const PeerChannelSecurity& peer = {});

}  // namespace tessera::cli

#endif  // TESSERA_CLI_HOSTED_SERVICES_H_
