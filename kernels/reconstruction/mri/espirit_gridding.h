// The calibration region of non-Cartesian data for ESPIRiT (espirit.h), as
// BART's workflow `bart nufft -i -d24:24:1` + `bart fft`: the samples with
// |kx|, |ky| < size (1/FOV units) are inverted by the NUFFT in the least-squares
// sense (CG-SENSE with one unit coil per coil, as a stack sharing one plan
// per worker: 10 iterations, Toeplitz normal operator, the Pipe-Menon density
// of those samples as the preconditioner) onto a 2 size x 2 size image (the same FOV
// at low resolution), taken back to k-space by a centred FFT, and its centre
// is kept (twice the region so that the truncation's ringing falls mostly
// outside it): size x size x coils Cartesian calibration data (index u is
// k = u - size/2), within 0.7 % of the exact centre for radial data
// (espirit_test).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_GRIDDING_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_GRIDDING_H_

#include <complex>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/mri/espirit.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {

// kspace: coils x trajectory.size() on the host. INVALID_ARGUMENT for size <
// 2, coils < 1, or fewer than size^2 samples inside the box; errors of
// the density compensation and the NUFFT.
absl::StatusOr<std::vector<std::complex<float>>> GriddedCalibration(const Trajectory2D& trajectory,
                                                                    const std::complex<float>* kspace, int coils,
                                                                    int64_t size);

// GriddedCalibration at options.calibration_size (at most the image size),
// then EspiritFromCalibration: maps at nx x ny.
absl::StatusOr<EspiritMaps> EspiritNonCartesian(const Trajectory2D& trajectory, const std::complex<float>* kspace,
                                                int coils, int64_t nx, int64_t ny, const EspiritOptions& options = {});

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_ESPIRIT_GRIDDING_H_
