// The calibration box of 3-D non-Cartesian data (stack of stars, kooshball)
// for 3-D ESPIRiT (espirit3d.h), as espirit_gridding.h does in 2-D (BART's
// `nufft -i` + `fft` workflow): the samples with |kx|, |ky|, |kz| < size are
// inverted by the 3-D NUFFT in the least-squares sense (CG-SENSE with one unit
// coil, coil by coil: 10 iterations, Toeplitz normal operator, lambda 1e-3,
// preconditioned by a cell-count density: 1 / the samples in each unit k-space
// cell) onto a (2 size)^3 image (the same FOV at low resolution), taken back
// to k-space by a centred FFT, and its size^3 centre kept: Cartesian
// calibration data (size^3 x coils, index u is k = u - size/2). Cruder than
// 2-D: 14 % from the exact centre for a 1000-spoke kooshball at size 12
// (espirit3d_test), yet maps within |<S, S_cartesian>| >= 0.9995 of the
// maps from the exact Cartesian k-space.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_GRIDDING3D_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_GRIDDING3D_H_

#include <array>
#include <complex>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/mri/espirit.h"

namespace tessera {
namespace recon {
namespace mri {

// kx, ky, kz: `points` coordinates (1/FOV units); kspace: coils x points; host
// memory. INVALID_ARGUMENT for size < 2, coils < 1, points < 1, null arrays,
// or fewer than size^3 samples inside the box; errors of CG-SENSE.
absl::StatusOr<std::vector<std::complex<float>>> GriddedCalibration3d(int64_t points, const float* kx,
                                                                      const float* ky, const float* kz,
                                                                      const std::complex<float>* kspace, int coils,
                                                                      int64_t size);

// GriddedCalibration3d at options.calibration_size (at most the image's
// smallest side), then Espirit3dFromCalibration on `stream`: maps at image.
absl::StatusOr<EspiritMaps> Espirit3dNonCartesian(const Stream& stream, int64_t points, const float* kx,
                                                  const float* ky, const float* kz,
                                                  const std::complex<float>* kspace, int coils,
                                                  std::array<int64_t, 3> image, const EspiritOptions& options = {});

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_GRIDDING3D_H_
