// The noise level of an image, and the field smoothing a registration derives
// from it (issue 17).
//
// Why: the greedy stage smooths the whole displacement field after every
// iteration (Thirion's "elastic" regularisation). That is what keeps the field
// from following noise in noisy images, and measured on the
// bench/registration_cases set it is worth +0.01 Dice on the two noisy cases;
// on clean images it only stiffens the field (the smoothing compounds over the
// iterations: sigma 0.5 over 115 iterations acts like sigma ~5), and it cost
// the clean macaque case 0.01 Dice. In a Bayesian reading the weight of the
// prior against the data term grows with the noise variance; here the
// per-iteration smoothing sigma grows in proportion to the noise sigma.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_NOISE_ESTIMATE_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_NOISE_ESTIMATE_H_

#include <cstdint>

#include "common/ndarray.h"

namespace tessera::registration {

// Donoho's robust noise estimate for a host float32 (nx, ny, nz) array: the
// median absolute finest-scale diagonal Haar wavelet coefficient (HHH) over
// 2x2x2 blocks, divided by 0.6745. HHH is zero for anything constant along
// any one axis, so smooth anatomy and axis-aligned edges barely enter it;
// blocks whose 8 values are all equal (clamped or empty background) are
// skipped. A 2-D image (one axis of length 1) uses the HH coefficient of 2x2
// blocks. For i.i.d. Gaussian noise of sigma s the result tends to s. At most
// max_blocks blocks are visited (evenly strided) so gigavoxel images cost
// milliseconds. Returns 0 when no block qualifies.
double EstimateNoiseSigma(const NDArray& image, int64_t max_blocks = 1 << 20);

// Field smoothing per iteration, voxels, for normalised images ([0, 1]) whose
// larger noise estimate is `noise_sigma`: kWarpSigmaPerNoise * noise_sigma,
// at most kMaxAutoWarpSigma.
inline constexpr double kWarpSigmaPerNoise = 25.0;
inline constexpr double kMaxAutoWarpSigma = 1.0;
double AutoWarpSigma(double noise_sigma);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_NOISE_ESTIMATE_H_
