// The input volumes of a registration request: NIfTI files or DICOM series
// (a directory, a zip or one file: common/dicom/dicom_series.h) under the data
// roots (read when the job runs) or volumes already in memory (uploads to
// RegistrationService). Shared by RegistrationService and the registration
// job engine.
#ifndef TESSERA_SERVICES_REGISTRATION_REQUEST_INPUTS_H_
#define TESSERA_SERVICES_REGISTRATION_REQUEST_INPUTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/volume.h"
#include "kernels/registration/pipeline/registration_job.h"

namespace tessera::registration {

struct VolumeInput {
  std::string what;              // "fixed", "moving labels", ...: prefixes errors
  std::string path;              // resolved, when from a file
  std::optional<Volume> volume;  // when in memory
  std::string description() const { return volume ? "upload" : path; }
};

struct RequestInputs {
  VolumeInput fixed, moving;
  std::optional<VolumeInput> fixed_labels, moving_labels;
  // Issue 34: the metric's masks (any grid) and the start transform
  // (already read: initial_transform.h).
  std::optional<VolumeInput> fixed_mask, moving_mask;
  std::optional<Mat4> initial_transform;
};

// Resolves `requested` under `real_roots` (ResolveUnderRoots: NOT_FOUND,
// PERMISSION_DENIED, ... prefixed with `what`), and refuses a file too large
// to hold a volume of at most `max_volume_bytes` before decompressing it
// (RESOURCE_EXHAUSTED).
absl::StatusOr<VolumeInput> ResolveVolumePath(const std::string& requested, const std::string& what,
                                              const std::vector<std::string>& real_roots, int64_t max_volume_bytes);

// Reads the files (or takes the volumes in memory): RESOURCE_EXHAUSTED for
// a file holding more than `max_volume_bytes`; label maps become integer
// maps; INVALID_ARGUMENT when the fixed labels are not on the fixed grid.
absl::StatusOr<RegistrationInputs> MaterializeInputs(const RequestInputs& inputs, int64_t max_volume_bytes);

}  // namespace tessera::registration

#endif  // TESSERA_SERVICES_REGISTRATION_REQUEST_INPUTS_H_
