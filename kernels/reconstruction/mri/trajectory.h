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

// 3-D trajectories (issue 36), same units and order (sample fastest, then
// spoke, then partition), kz added.
struct Trajectory3D {
  int64_t samples = 0;     // per spoke (readout)
  int64_t spokes = 0;      // per partition (all spokes for a kooshball)
  int64_t partitions = 1;  // kz partitions of a stack of stars, 1 for a kooshball
  std::vector<float> kx, ky, kz;  // samples x spokes x partitions each, 1/FOV units
  int64_t size() const { return samples * spokes * partitions; }
};

// Stack of stars: the 2-D radial spokes of RadialTrajectory (same angles in
// every partition, so all partitions share one in-plane trajectory) on the
// Cartesian partitions kz = p - partitions / 2, p < partitions (partitions =
// nz samples kz fully). INVALID_ARGUMENT as RadialTrajectory or partitions < 1.
absl::StatusOr<Trajectory3D> StackOfStarsTrajectory(int64_t image_size, int64_t partitions, int64_t samples,
                                                    int64_t spokes, RadialOrdering ordering);

// 3-D radial ("kooshball"): full diameters through k = 0 (samples as
// RadialTrajectory), directions by the 2-D golden means (Chan et al., MRM
// 2009: phi1 = 0.4656, phi2 = 0.6823): spoke s has cos(polar) = frac(s phi1)
// and azimuth 2 pi frac(s phi2), spreading any number of spokes evenly over
// the half sphere (a diameter covers the other half). INVALID_ARGUMENT as
// RadialTrajectory.
absl::StatusOr<Trajectory3D> KooshballTrajectory(int64_t image_size, int64_t samples, int64_t spokes);

// NUFFT coordinates (kernels/reconstruction/nufft/nufft.h) x = 2 pi kx / nx,
// y = 2 pi ky / ny, so that type 2 with sign -1 on an nx x ny image computes
// the MRI signal sum_n f[n] exp(-2 pi i k . (n - N/2) / N).
void ToNufftCoordinates(const Trajectory2D& trajectory, int64_t nx, int64_t ny, std::vector<float>* x,
                        std::vector<float>* y);

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_TRAJECTORY_H_
