#include "services/som/som_module.h"

#include <string>

#include "common/status.h"
#include "services/som/som_service.h"
#include "services/som/training_engine.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<HostedModule>> NewSomModule(const ServerOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<SomAtlasServiceImpl> service, SomAtlasServiceImpl::Create(options));
  return MakeServiceModule(std::move(service), [](SomAtlasServiceImpl& service, const std::string& state_dir,
                                                  jobs::EngineRegistry& engines) -> absl::Status {
    TESSERA_ASSIGN_OR_RETURN(som::TrainingEngineOptions engine_options, service.TrainingEngineOptions(state_dir));
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const jobs::Engine> engine, som::NewTrainingEngine(std::move(engine_options)));
    return engines.Add(std::move(engine));
  });
}

}  // namespace tessera
