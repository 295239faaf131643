#include "services/reconstruction/reconstruction_module.h"

#include <string>
#include <vector>

#include "common/status.h"
#include "services/reconstruction/reconstruction_engine.h"
#include "services/reconstruction/reconstruction_service.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<HostedModule>> NewReconstructionModule(const ServerOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<ReconstructionServiceImpl> service,
                           ReconstructionServiceImpl::Create(options));
  return MakeServiceModule(std::move(service), [options](ReconstructionServiceImpl&, const std::string& state_dir,
                                                          jobs::EngineRegistry& engines) -> absl::Status {
    std::vector<std::string> roots = options.data_roots;
    TESSERA_ASSIGN_OR_RETURN(std::string uploads, CreateReconstructionUploadDir(state_dir));
    roots.push_back(uploads);
    TESSERA_ASSIGN_OR_RETURN(auto engine, reconstruction::ReconstructionEngine::Create(roots, options.max_volume_bytes,
                                                                                        options.device));
    return engines.Add(std::move(engine));
  });
}

}  // namespace tessera
