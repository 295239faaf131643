// A RegisterRequest's options (tessera.v1.RegistrationOptions) as registrar
// options: defaults for unset fields, every field checked. Shared by
// RegistrationService and the registration job engine.
#ifndef TESSERA_SERVICES_REGISTRATION_REQUEST_OPTIONS_H_
#define TESSERA_SERVICES_REGISTRATION_REQUEST_OPTIONS_H_

#include <string>

#include "absl/status/statusor.h"
#include "kernels/registration/pipeline/registrar.h"
#include "tessera/v1/registration.pb.h"

namespace tessera::registration {

// INVALID_ARGUMENT naming the bad field. An empty device becomes
// `default_device`; whether that device exists here is not checked (a
// scheduler may validate jobs for workers that have the GPU it lacks).
absl::StatusOr<RegistrationOptions> ParseRegistrationOptions(const v1::RegistrationOptions& proto,
                                                             const std::string& default_device);

// ParseRegistrationOptions, then FAILED_PRECONDITION (with the reason) for
// "cuda" in a process without a usable GPU.
absl::StatusOr<RegistrationOptions> ToRegistrarOptions(const v1::RegistrationOptions& proto,
                                                       const std::string& default_device);

}  // namespace tessera::registration

#endif  // TESSERA_SERVICES_REGISTRATION_REQUEST_OPTIONS_H_
