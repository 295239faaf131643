// Beamformed ultrasound images out: NIfTI (for viewers and pipelines) and
// 8-bit PNG B-mode previews, both log-compressed with a given dB range
// (kernels/reconstruction/ultrasound/bmode.h).
//
// NIfTI: float32 (nx, nz, 1); voxel (i, j) is pixel (ix = i, iz = j) of the
// grid, its world position (RAS+ mm) is (x, 0, -z): i runs left to right
// along the array, j down into the medium (inferior), so viewers show the
// shallowest row at the top. Values: 20 log10(|y| / max |y|) clamped to
// [-dynamic_range_db, 0] when dynamic_range_db > 0; the envelope |y| when
// dynamic_range_db == 0.
//
// PNG: nx x nz gray pixels (one pixel per image pixel, not resampled to the
// grid's aspect ratio), the shallowest row at the top; 0 dB is 255 and
// -dynamic_range_db (or below) 0.
//
// INVALID_ARGUMENT for an image whose size is not grid.size(), a bad grid or
// a negative / non-finite range (PNG: the range must be > 0); file errors as
// common/nifti_io.h and common/png_io.h report them.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_FORMATS_ULTRASOUND_IMAGE_H_
#define TESSERA_SERVICES_RECONSTRUCTION_FORMATS_ULTRASOUND_IMAGE_H_

#include <complex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/png_io.h"
#include "kernels/reconstruction/ultrasound/acquisition.h"

namespace tessera::recon::formats {

absl::Status WriteBModeNifti(const std::vector<std::complex<float>>& image, const ultrasound::ImageGrid& grid,
                             double dynamic_range_db, const std::string& path);

// The PNG's pixels, for tiling several images side by side (common/image_preview.h).
absl::StatusOr<Image8> RenderBMode(const std::vector<std::complex<float>>& image, const ultrasound::ImageGrid& grid,
                                   double dynamic_range_db);

absl::Status WriteBModePng(const std::vector<std::complex<float>>& image, const ultrasound::ImageGrid& grid,
                           double dynamic_range_db, const std::string& path);

}  // namespace tessera::recon::formats

#endif  // TESSERA_SERVICES_RECONSTRUCTION_FORMATS_ULTRASOUND_IMAGE_H_
