// Sampling density compensation weights for non-Cartesian k-space: each
// sample's share of k-space area, in (1/FOV)^2, so that the adjoint
// ("gridding") reconstruction
//   x = (1 / (nx ny)) sum_c conj(S_c) NUFFT_type1(w . y_c)
// returns pixel values on the image's scale (a fully sampled Cartesian grid
// has w = 1 everywhere). CG-SENSE can use the same weights to weight its
// least-squares fit (a preconditioner; CgSenseOptions::density_weights).
// CPU only: weights are computed once per trajectory.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_MRI_DENSITY_COMPENSATION_H_
#define TESSERA_KERNELS_RECONSTRUCTION_MRI_DENSITY_COMPENSATION_H_

#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/mri/trajectory.h"

namespace tessera {
namespace recon {
namespace mri {

// Analytic ramp for radial diameters (RadialTrajectory, either ordering):
// w = pi |k| dk / spokes with dk the readout spacing, and pi dk^2 / (4 spokes)
// at k = 0 (the central disc shared by every spoke). INVALID_ARGUMENT for an
// empty trajectory.
absl::StatusOr<std::vector<float>> RadialRampDensity(const Trajectory2D& trajectory);

// True when every spoke is a diameter (its samples on one line through k = 0)
// with the readout spacing of the first spoke, to 1e-3 of it: the trajectories
// RadialRampDensity is exact for.
bool IsRadialDiameters(const Trajectory2D& trajectory);

struct PipeMenonOptions {
  int iterations = 20;
  // Radius (1/FOV) of the cone kernel C the weights are made to satisfy
  // sum_j w_j C(k_l - k_j) = 1; it must exceed the largest gap between
  // neighbouring samples (for undersampled radial, use the ramp instead).
  double kernel_radius = 2.0;
};

// Pipe & Menon's fixed point (MRM 1999) w <- w / (C * w) from w = 1, with C
// a cone of unit integral, summed exactly over neighbours found by binning
// (no grid). Works for any trajectory (spirals). INVALID_ARGUMENT for an
// empty trajectory, iterations < 1 or a non-positive radius.
absl::StatusOr<std::vector<float>> PipeMenonDensity(const Trajectory2D& trajectory,
                                                    const PipeMenonOptions& options = {});

}  // namespace mri
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_MRI_DENSITY_COMPENSATION_H_
