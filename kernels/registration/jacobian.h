// Jacobian determinant of the map phi(x) = x + u(x) for a displacement field
// u, and a count of folded voxels (det <= 0). CPU reference in
// jacobian_cpu.cc (double, threaded over z-slabs); CUDA in jacobian.cu (float,
// per-block partials reduced in a fixed order: deterministic).
//
// Convention: u is planar float32 (nx, ny, nz, 3), component c along axis c
// (x fastest). With kVoxels units derivatives are per voxel:
//   J = I + D,  D[c][d] = du_c / dx_d
//   du/dx_d = (u(x + e_d) - u(x - e_d)) / 2 inside,
//             u(x + e_d) - u(x)   at index 0,  u(x) - u(x - e_d) at n_d - 1
//             (one-sided first order at the borders), 0 when n_d == 1.
// kNormalized fields ([-1, 1], aligned corners) are converted first:
// u_c[voxels] = u_c * (n_c - 1) / 2. Spacing is not involved: det J is the
// ratio of volumes, the same in voxel and mm units for an axis-aligned grid.
//
// Tolerance CUDA vs CPU (jacobian_test.cc): det within 1e-5 * max(1, |det|)
// + 1e-5; counts equal except for voxels with |det| < 1e-4 (float vs double sign).
#ifndef TESSERA_KERNELS_REGISTRATION_JACOBIAN_H_
#define TESSERA_KERNELS_REGISTRATION_JACOBIAN_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/registration/displacement_units.h"

namespace tessera {
namespace registration {

struct JacobianSummary {
  int64_t voxels = 0;       // nx * ny * nz
  int64_t nonpositive = 0;  // voxels with det J <= 0 (folds)
  double min_det = 0;       // over all voxels (0 for an empty field)
  double max_det = 0;
};

// JacobianDeterminant() computes det J per voxel into *det (optional: null
// for the summary only; else float32 (nx, ny, nz), every element written) and
// returns the summary. displacement: float32 (nx, ny, nz, 3) in the stream's
// backend memory. Synchronises a CUDA stream (the summary is read back).
// Device scratch on CUDA: 4 * multiprocessors partials of 24 bytes.
// Errors: INVALID_ARGUMENT, FAILED_PRECONDITION (CUDA stream without CUDA),
// CUDA errors.
absl::StatusOr<JacobianSummary> JacobianDeterminant(const NDArray& displacement, NDArray* det,
                                                    const Stream& stream,
                                                    DisplacementUnits units = DisplacementUnits::kVoxels);

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_JACOBIAN_H_
