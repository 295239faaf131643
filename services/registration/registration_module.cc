#include "services/registration/registration_module.h"

#include <string>
#include <vector>

#include "common/status.h"
#include "services/registration/apply_transforms_engine.h"
#include "services/registration/registration_engine.h"
#include "services/registration/registration_service.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<HostedModule>> NewRegistrationModule(const ServerOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<RegistrationServiceImpl> service, RegistrationServiceImpl::Create(options));
  return MakeServiceModule(std::move(service), [options](RegistrationServiceImpl&, const std::string& state_dir,
                                                          jobs::EngineRegistry& engines) -> absl::Status {
    std::vector<std::string> roots = options.data_roots;
    TESSERA_ASSIGN_OR_RETURN(std::string uploads, CreateRegistrationUploadDir(state_dir));
    roots.push_back(uploads);
    TESSERA_ASSIGN_OR_RETURN(auto engine,
                             registration::RegistrationEngine::Create(roots, options.max_volume_bytes, options.device));
    TESSERA_RETURN_IF_ERROR(engines.Add(std::move(engine)));
    // Issue 34: apply-transforms jobs read their own uploads and the
    // published results of registration jobs (<state dir>/results, where the
    // scheduler host's workers publish them: cli/scheduler_host.cc).
    TESSERA_ASSIGN_OR_RETURN(std::string apply_uploads, CreateApplyTransformsUploadDir(state_dir));
    roots.push_back(apply_uploads);
    TESSERA_ASSIGN_OR_RETURN(auto apply, registration::ApplyTransformsEngine::Create(
                                             roots, options.max_volume_bytes, options.device,
                                             jobs::StateSubdir(state_dir, "results")));
    return engines.Add(std::move(apply));
  });
}

}  // namespace tessera
