// Issue 34: RegisterRequest.initial_transform (a TransformSource) read into
// the registrar's RegistrationOptions::initial_transform (fixed RAS ->
// moving RAS): an affine file under the data roots or inline bytes, ITK
// MATLAB (.mat, ANTs' 0GenericAffine.mat) or ITK text (.txt/.tfm),
// ParseItkAffine; `inverse` inverts it. Displacement fields and registration
// job ids are refused for now (INVALID_ARGUMENT saying what to pass).
#ifndef TESSERA_SERVICES_REGISTRATION_INITIAL_TRANSFORM_H_
#define TESSERA_SERVICES_REGISTRATION_INITIAL_TRANSFORM_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/volume.h"
#include "tessera/v1/registration.pb.h"

namespace tessera::registration {

// Empty when the source is unset. Errors name "initial_transform":
// INVALID_ARGUMENT (malformed file, a displacement field, a job id, a
// singular affine to invert), NOT_FOUND / PERMISSION_DENIED (the path).
absl::StatusOr<std::optional<Mat4>> ReadInitialTransform(const v1::TransformSource& source,
                                                         const std::vector<std::string>& real_roots);

}  // namespace tessera::registration

#endif  // TESSERA_SERVICES_REGISTRATION_INITIAL_TRANSFORM_H_
