// Which engines a serving process runs: one per hosted service with long
// work. A new engine adds its lines here.
#include "cli/scheduler_host.h"
#include "common/status.h"
#include "services/registration/registration_engine.h"

namespace tessera::cli {

absl::Status RegisterEngines(HostedServices& services, const ServerOptions& options, jobs::EngineRegistry* engines) {
  if (services.registration) {
    TESSERA_ASSIGN_OR_RETURN(auto registration, registration::RegistrationEngine::Create(
                                                    options.data_roots, options.max_volume_bytes, options.device));
    TESSERA_RETURN_IF_ERROR(engines->Add(std::move(registration)));
  }
  return absl::OkStatus();
}

}  // namespace tessera::cli
