#include "kernels/registration/pipeline/nifti_voxels.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/nifti_io.h"

namespace tessera::registration {

absl::StatusOr<int64_t> NiftiSpatialVoxels(const std::string& path) {
  absl::StatusOr<std::vector<int64_t>> dims = ReadNiftiHeaderDims(path);
  if (!dims.ok()) return dims.status();
  int64_t voxels = 1;
  for (size_t d = 0; d < std::min<size_t>(dims->size(), 3); ++d) {
    if (voxels > std::numeric_limits<int64_t>::max() / (*dims)[d]) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": dimension ", d + 1, " is ", (*dims)[d]));
    }
    voxels *= (*dims)[d];
  }
  return voxels;
}

}  // namespace tessera::registration
