// The fingerprint module: FingerprintService over this process's galleries
// and the "fingerprint.search" engine, which searches the service's live
// galleries (the one each spec names). A scheduler fronting gallery shards
// hosts NewFingerprintRouterModule instead.
#ifndef TESSERA_SERVICES_FINGERPRINT_FINGERPRINT_MODULE_H_
#define TESSERA_SERVICES_FINGERPRINT_FINGERPRINT_MODULE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/fingerprint/fingerprint_service.h"
#include "services/server/bearer_channel.h"
#include "services/server/hosted_module.h"
#include "services/server/server_options.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<HostedModule>> NewFingerprintModule(const ServerOptions& options,
                                                                   const FingerprintServiceOptions& fingerprint);

// FingerprintService as a router over the FingerprintService servers at
// `shards` (HOST:PORT; their order is part of the routing: keep it fixed).
// INVALID_ARGUMENT for a bad or repeated address. `image`: what the router
// takes in the transaction images it extracts itself (serve --fp-min-quality).
absl::StatusOr<std::unique_ptr<HostedModule>> NewFingerprintRouterModule(const ServerOptions& options,
                                                                         const std::vector<std::string>& shards,
                                                                         const PeerChannelSecurity& peer,
                                                                         const fingerprint::ImageLimits& image = {});

}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FINGERPRINT_MODULE_H_
