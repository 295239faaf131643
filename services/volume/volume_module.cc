#include "services/volume/volume_module.h"

#include "common/status.h"
#include "services/volume/volume_service.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<HostedModule>> NewVolumeModule(const ServerOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<VolumeServiceImpl> service, VolumeServiceImpl::Create(options));
  return MakeServiceModule(std::move(service));
}

}  // namespace tessera
