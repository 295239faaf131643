#include "cli/hosted_services.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "services/fingerprint/fingerprint_module.h"

namespace tessera::cli {

void HostedServices::AddTo(ServiceHost& host) {
  for (auto& [name, module] : modules) {
    for (grpc::Service* service : module->GrpcServices()) host.AddService(service);
    for (const NotServing& n : module->NotServingServices()) host.SetNotServing(n.service, n.why);
  }
}

absl::Status HostedServices::AddEngines(const std::string& state_dir, jobs::EngineRegistry& engines) {
  for (auto& [name, module] : modules) {
    if (absl::Status s = module->AddEngines(state_dir, engines); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("the ", name, " engines: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status HostedServices::AttachScheduler(scheduler::Scheduler& scheduler, const std::string& state_dir) {
  for (auto& [name, module] : modules) TESSERA_RETURN_IF_ERROR(module->AttachScheduler(scheduler, state_dir));
  return absl::OkStatus();
}

bool HostedServices::Hosts(const std::string& name) const {
  return std::any_of(modules.begin(), modules.end(), [&](const auto& m) { return m.first == name; });
}

std::vector<std::string> ModuleNames(const std::vector<ModuleEntry>& modules) {
  std::vector<std::string> names;
  for (const ModuleEntry& m : modules) names.push_back(m.name);
  return names;
}

absl::StatusOr<HostedServices> CreateHostedServices(const std::vector<ModuleEntry>& modules,
                                                    const ModuleOptions& options,
                                                    const std::vector<std::string>& names) {
  const std::vector<std::string> known = ModuleNames(modules);
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown service '", name, "'; known: ", absl::StrJoin(known, ", ")));
    }
  }
  HostedServices services;
  for (const ModuleEntry& entry : modules) {
    if (!names.empty() && std::find(names.begin(), names.end(), entry.name) == names.end()) continue;
    TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<HostedModule> module, entry.create(options));
    services.modules.emplace_back(entry.name, std::move(module));
  }
  return services;
}

absl::Status AttachFingerprintRouter(HostedServices& services, const ServerOptions& options,
                                     const std::vector<std::string>& shards, const PeerChannelSecurity& peer,
                                     const fingerprint::ImageLimits& image) {
  if (services.Hosts("fingerprint")) {
    return absl::FailedPreconditionError("this process already hosts a FingerprintService (fingerprint shards are "
                                         "for a scheduler without one: --role scheduler)");
  }
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<HostedModule> router, NewFingerprintRouterModule(options, shards, peer, image));
  services.modules.emplace_back("fingerprint", std::move(router));
  return absl::OkStatus();
}

}  // namespace tessera::cli
