#include "services/fingerprint/fingerprint_module.h"

#include "common/status.h"
#include "services/fingerprint/search_engine.h"
#include "services/fingerprint/shard_router.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<HostedModule>> NewFingerprintModule(const ServerOptions& options,
                                                                   const FingerprintServiceOptions& fingerprint) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<FingerprintServiceImpl> service,
                           FingerprintServiceImpl::Create(options, fingerprint));
  return MakeServiceModule(std::move(service), [](FingerprintServiceImpl& service, const std::string& /*state_dir*/,
                                                  jobs::EngineRegistry& engines) -> absl::Status {
    return engines.Add(std::make_shared<fingerprint::SearchEngine>(service.searcher_lookup(),
                                                                   service.options().search_limits()));
  });
}

absl::StatusOr<std::unique_ptr<HostedModule>> NewFingerprintRouterModule(const ServerOptions& options,
                                                                         const std::vector<std::string>& shards,
                                                                         const PeerChannelSecurity& peer,
                                                                         const fingerprint::ImageLimits& image) {
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<FingerprintShardRouter> router,
                           FingerprintShardRouter::CreateForAddresses(shards, options.max_receive_message_bytes, peer));
  router->set_image_limits(image);
  return MakeServiceModule(std::move(router));
}

}  // namespace tessera
