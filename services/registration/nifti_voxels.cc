#include "services/registration/nifti_voxels.h"

#include <nifti2_io.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"

namespace tessera::registration {

absl::StatusOr<int64_t> NiftiSpatialVoxels(const std::string& path) {
  int version = 0;
  std::unique_ptr<void, decltype(&std::free)> header(nifti_read_header(path.c_str(), &version, /*check=*/1),
                                                     &std::free);
  if (header == nullptr || (version != 1 && version != 2)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a readable NIfTI header"));
  }
  int64_t dim[4] = {0, 1, 1, 1};
  for (int d = 0; d < 4; ++d) {
    dim[d] = version == 1 ? static_cast<const nifti_1_header*>(header.get())->dim[d]
                          : static_cast<const nifti_2_header*>(header.get())->dim[d];
  }
  int64_t voxels = 1;
  for (int d = 1; d <= std::min<int64_t>(dim[0], 3); ++d) {
    if (dim[d] < 1 || voxels > std::numeric_limits<int64_t>::max() / dim[d]) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": dimension ", d, " is ", dim[d]));
    }
    voxels *= dim[d];
  }
  return voxels;
}

}  // namespace tessera::registration
