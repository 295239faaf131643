// Non-Cartesian 2-D k-space trajectories for simulations and tests, in BART's
// units: cycles per field of view (1/FOV), so an N x N image is sampled up to
// |k| = N/2 and a Cartesian grid point is an integer k in [-N/2, N/2).
// Layout: sample fastest, then spoke / interleave, the order of BART's
// 3 x samples x spokes trajectory files (kz = 0 in 2-D); kx and ky are kept
// as separate arrays because that is what the NUFFT takes.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_TRAJECTORY_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_TRAJECTORY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera {
namespace recon {
namespace mri {

struct Trajectory2D {
  int64_t samples = 0;  // per spoke / interleave (readout)
  int64_t spokes = 0;   // spokes or interleaves
  std::vector<float> kx, ky;  // samples x spokes each, 1/FOV units
  int64_t size() const { return samples * spokes; }
};

enum class RadialOrdering {
  kUniform,      // spoke s at angle pi s / spokes (diameters cover [0, pi))
  kGoldenAngle,  // spoke s at angle s * pi / golden ratio (111.25 deg), mod 2 pi
};

// Radial diameters: sample i of a spoke at radius (i - samples/2) * N / samples,
// so `samples` points cover [-N/2, N/2) with spacing N / samples (samples = 2N
// is the usual 2x readout oversampling), sample samples/2 at k = 0.
// INVALID_ARGUMENT for image_size < 2, samples < 2 or spokes < 1.
absl::StatusOr<Trajectory2D> RadialTrajectory(int64_t image_size, int64_t samples, int64_t spokes,
                                              RadialOrdering ordering);

// Archimedean spiral interleaves from k = 0 out to |k| = N/2 (1 - 1/samples):
// k(t) = (N/2) t exp(i (2 pi turns t + 2 pi l / interleaves)), t = i / samples.
// INVALID_ARGUMENT for image_size < 2, samples < 2, interleaves < 1 or a
// non-positive number of turns.
absl::StatusOr<Trajectory2D> SpiralTrajectory(int64_t image_size, int64_t samples, int64_t interleaves, double turns);

// NUFFT coordinates (kernels/reconstruction/nufft/nufft.h) x = 2 pi kx / nx,
// y = 2 pi ky / ny, so that type 2 with sign -1 on an nx x ny image computes
// the MRI signal sum_n f[n] exp(-2 pi i k . (n - N/2) / N).
void ToNufftCoordinates(const Trajectory2D& trajectory, int64_t nx, int64_t ny, std::vector<float>* x,
                        std::vector<float>* y);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_TRAJECTORY_H_
