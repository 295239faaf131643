// The SOM module: SomAtlasService (atlases, and training jobs over the
// scheduler) and the "som.train" engine, which saves into the service's atlas
// directory so the service serves each atlas at once.
#ifndef TESSERA_SERVICES_SOM_SOM_MODULE_H_
#define TESSERA_SERVICES_SOM_SOM_MODULE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "services/server/hosted_module.h"
#include "services/server/server_options.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<HostedModule>> NewSomModule(const ServerOptions& options);

}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_SOM_MODULE_H_
