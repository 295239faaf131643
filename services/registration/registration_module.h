// The registration module: RegistrationService over the scheduler and the
// "registration" engine, whose jobs may name the data roots and the uploads
// the service wrote (RegistrationUploadDir).
#ifndef TESSERA_SERVICES_REGISTRATION_REGISTRATION_MODULE_H_
#define TESSERA_SERVICES_REGISTRATION_REGISTRATION_MODULE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "services/server/hosted_module.h"
#include "services/server/server_options.h"

namespace tessera {

absl::StatusOr<std::unique_ptr<HostedModule>> NewRegistrationModule(const ServerOptions& options);

}  // namespace tessera

#endif  // TESSERA_SERVICES_REGISTRATION_REGISTRATION_MODULE_H_
