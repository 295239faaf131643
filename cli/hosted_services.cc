#include "cli/hosted_services.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"

namespace tessera::cli {

void HostedServices::AddTo(ServiceHost& host) {
  if (volume) host.AddService(volume.get());
  if (registration) host.AddService(registration.get());
  if (fingerprint) host.AddService(fingerprint.get());
  if (som) host.AddService(som.get());
  if (reconstruction) host.AddService(reconstruction.get());
  if (fingerprint_router) host.AddService(fingerprint_router.get());
}

const std::vector<std::string>& HostableServiceNames() {
  static const auto* names = new std::vector<std::string>{"volume", "registration", "fingerprint", "som", "reconstruction"};
  return *names;
}

absl::StatusOr<HostedServices> CreateHostedServices(const ServerOptions& options,
                                                    const std::vector<std::string>& names,
                                                    const FingerprintServiceOptions& fingerprint_options) {
  const std::vector<std::string>& known = HostableServiceNames();
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown service '", name, "'; known: ", absl::StrJoin(known, ", ")));
    }
  }
  const auto wanted = [&](const char* name) {
    return names.empty() || std::find(names.begin(), names.end(), name) != names.end();
  };
  HostedServices services;
  if (wanted("volume")) {
    TESSERA_ASSIGN_OR_RETURN(services.volume, VolumeServiceImpl::Create(options));
  }
  if (wanted("registration")) {
    TESSERA_ASSIGN_OR_RETURN(services.registration, RegistrationServiceImpl::Create(options));
  }
  if (wanted("fingerprint")) {
    TESSERA_ASSIGN_OR_RETURN(services.fingerprint, FingerprintServiceImpl::Create(options, fingerprint_options));
  }
  if (wanted("som")) {
    TESSERA_ASSIGN_OR_RETURN(services.som, SomAtlasServiceImpl::Create(options));
  }
  if (wanted("reconstruction")) {
    TESSERA_ASSIGN_OR_RETURN(services.reconstruction, ReconstructionServiceImpl::Create(options));
  }
  return services;
}

absl::Status AttachFingerprintRouter(HostedServices& services, const ServerOptions& options,
                                     const std::vector<std::string>& shards, const PeerChannelSecurity& peer) {
  if (services.fingerprint || services.fingerprint_router) {
    return absl::FailedPreconditionError("this process already hosts a FingerprintService (fingerprint shards are "
                                         "for a scheduler without one: --role scheduler)");
  }
  TESSERA_ASSIGN_OR_RETURN(services.fingerprint_router,
                           FingerprintShardRouter::CreateForAddresses(shards, options.max_receive_message_bytes, peer));
  return absl::OkStatus();
}

}  // namespace tessera::cli
