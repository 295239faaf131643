#include "cli/hosted_services.h"

#include "common/status.h"

namespace tessera::cli {

void HostedServices::AddTo(ServiceHost& host) {
  host.AddService(volume.get());
  host.AddService(registration.get());
}

absl::StatusOr<HostedServices> CreateHostedServices(const ServerOptions& options) {
  HostedServices services;
  TESSERA_ASSIGN_OR_RETURN(services.volume, VolumeServiceImpl::Create(options));
  TESSERA_ASSIGN_OR_RETURN(services.registration, RegistrationServiceImpl::Create(options));
  return services;
}

}  // namespace tessera::cli
