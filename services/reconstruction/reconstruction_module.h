// The reconstruction module: ReconstructionService over the scheduler and the
// "reconstruction" engine, whose jobs may name the data roots and the files
// the service wrote (ReconstructionUploadDir).
#ifndef TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_MODULE_H_
#define TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_MODULE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "services/server/hosted_module.h"
#include "services/server/server_options.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<HostedModule>> NewReconstructionModule(const ServerOptions& options);

}  // namespace tessera

#endif  // TESSERA_SERVICES_RECONSTRUCTION_RECONSTRUCTION_MODULE_H_
