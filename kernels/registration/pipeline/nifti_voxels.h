// The voxel count of a NIfTI image's first three dimensions, from its header
// alone (no data read or decompressed beyond the header): cheap enough for a
// scheduler's placement estimate.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_NIFTI_VOXELS_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_NIFTI_VOXELS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace tessera::registration {

// INVALID_ARGUMENT when `path` is not a readable NIfTI-1/-2 header.
absl::StatusOr<int64_t> NiftiSpatialVoxels(const std::string& path);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_NIFTI_VOXELS_H_
