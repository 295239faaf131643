// Which engines a serving process runs: one per hosted service with long
// work. A new engine adds its lines here.
#include "cli/scheduler_host.h"
#include "common/status.h"
#include "services/fingerprint/search_engine.h"
#include "services/reconstruction/reconstruction_engine.h"
#include "services/registration/registration_engine.h"
#include "services/som/training_engine.h"

namespace tessera::cli {

absl::Status RegisterEngines(HostedServices& services, const ServerOptions& options, const std::string& state_dir,
                             jobs::EngineRegistry* engines) {
  if (services.registration) {
    // Jobs may name the data roots and the uploads RegistrationService wrote.
    std::vector<std::string> roots = options.data_roots;
    TESSERA_ASSIGN_OR_RETURN(std::string uploads, CreateRegistrationUploadDir(state_dir));
    roots.push_back(uploads);
    TESSERA_ASSIGN_OR_RETURN(auto registration,
                             registration::RegistrationEngine::Create(roots, options.max_volume_bytes, options.device));
    TESSERA_RETURN_IF_ERROR(engines->Add(std::move(registration)));
  }
  if (services.som) {
    // Saves into the service's atlas directory; the service serves each at
    // once. Jobs may name the data roots and the uploads SomAtlasService wrote.
    TESSERA_ASSIGN_OR_RETURN(som::TrainingEngineOptions som_options, services.som->TrainingEngineOptions(state_dir));
    TESSERA_ASSIGN_OR_RETURN(std::shared_ptr<const jobs::Engine> som, som::NewTrainingEngine(std::move(som_options)));
    TESSERA_RETURN_IF_ERROR(engines->Add(std::move(som)));
  }
  if (services.fingerprint) {
    // Searches the service's live galleries (the one each spec names).
    TESSERA_RETURN_IF_ERROR(engines->Add(std::make_shared<fingerprint::SearchEngine>(
        services.fingerprint->searcher_lookup(), services.fingerprint->options().search_limits())));
  }
  if (services.reconstruction) {
    // Jobs may name the data roots and the files ReconstructionService wrote.
    std::vector<std::string> roots = options.data_roots;
    TESSERA_ASSIGN_OR_RETURN(std::string uploads, CreateReconstructionUploadDir(state_dir));
    roots.push_back(uploads);
    TESSERA_ASSIGN_OR_RETURN(auto reconstruction, reconstruction::ReconstructionEngine::Create(
                                                      roots, options.max_volume_bytes, options.device));
    TESSERA_RETURN_IF_ERROR(engines->Add(std::move(reconstruction)));
  }
  return absl::OkStatus();
}

}  // namespace tessera::cli
