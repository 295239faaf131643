// SENSE reconstruction of Cartesian k-space that keeps every R-th
// phase-encoding line (BART's convention: a full nx x ny x coils array,
// zero where a line was not acquired). Host data in, host image out; the
// unfolding runs on `stream` (sense_unfold.h), the FFTs on the host (FFTW).
//
//   1. Sampled lines: a line is sampled when any coil has a non-zero value
//      on it. R (when options.reduction is 0) is the smallest R in [1, 8]
//      dividing n_axis for which some residue class of lines mod R is fully
//      sampled; extra lines outside that class (a calibration region) are
//      ignored.
//   2. The zero-filled class, inverse FFT'd (centred: index n/2 is k = 0 and
//      x = 0), is R-periodic along the axis with period L = n/R: its first L
//      rows times R are the aliased coil images of sense_unfold.h, up to the
//      phase exp(-2 pi i r o / R) of copy r for a class offset o, which is
//      folded into the coil maps.
//   3. SenseUnfold with Tikhonov weight lambda.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_CARTESIAN_SENSE_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_CARTESIAN_SENSE_H_

#include <complex>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"

namespace tessera {
namespace recon {
namespace mri {

struct CartesianSenseOptions {
  int reduction = 0;  // 0: detect from the sampled lines
  int axis = 1;       // undersampled axis: 0 (x) or 1 (y)
  float lambda = 0;   // Tikhonov weight on S^H S (maps with sum |S|^2 ~ 1)
};

struct CartesianSenseResult {
  std::vector<std::complex<float>> image;  // nx x ny
  int reduction = 0;
  int64_t ignored_lines = 0;  // sampled lines outside the kept class
  int64_t failed_pixels = 0;  // aliased pixels with a singular system (set to 0)
};

// kspace and maps: nx x ny x coils (x fastest, coil-major). INVALID_ARGUMENT
// for sizes that do not match, no sampled line, or no regular R <= 8
// pattern; errors of SenseUnfold.
absl::StatusOr<CartesianSenseResult> CartesianSense(const Stream& stream, int64_t nx, int64_t ny, int coils,
                                                    const std::vector<std::complex<float>>& kspace,
                                                    const std::vector<std::complex<float>>& maps,
                                                    const CartesianSenseOptions& options = {});

// Centred inverse 2-D DFT of each of `count` nx x ny grids, in place:
// x[n] = sum_k X[k] exp(+2 pi i (k - N/2) (n - N/2) / N), unnormalised.
absl::Status CenteredInverseFft2d(int64_t nx, int64_t ny, int count, std::complex<float>* grids);
// The forward transform (exponent -1), for simulating Cartesian data.
absl::Status CenteredForwardFft2d(int64_t nx, int64_t ny, int count, std::complex<float>* grids);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_CARTESIAN_SENSE_H_
