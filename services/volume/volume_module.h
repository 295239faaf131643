// The volume module: VolumeService (describe NIfTI files and streams); no jobs.
#ifndef TESSERA_SERVICES_VOLUME_VOLUME_MODULE_H_
#define TESSERA_SERVICES_VOLUME_VOLUME_MODULE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "services/server/hosted_module.h"
#include "services/server/server_options.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<HostedModule>> NewVolumeModule(const ServerOptions& options);

}  // namespace tessera

#endif  // TESSERA_SERVICES_VOLUME_VOLUME_MODULE_H_
