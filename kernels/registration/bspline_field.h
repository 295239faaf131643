// Cubic B-spline (free-form deformation) fields, issue 17: a displacement
// parametrised by a coarse control grid c, u = B c, and the adjoint that
// carries a dense gradient back to the control points, dL/dc = B^T dL/du.
// Both are separable (three 1-D passes); CPU reference in
// bspline_field_cpu.cc (also the CPU backend, threaded over rows), CUDA in
// bspline_field.cu (one thread per output element, the same gather in the
// same order: no atomics, deterministic).
//
// One axis: n voxels, S voxels per control interval (S > 0, any real value),
// m = floor((n - 1) / S) + 4 control points; control k sits at voxel
// coordinate (k - 1) S, so control 1 is on voxel 0 and the grid covers the
// voxels with one spare control point on each side (cubic support):
//
//   u(i) = sum_k beta3(i / S + 1 - k) c(k),   beta3 the cubic B-spline
//
// (4 non-zero terms per voxel). The adjoint evaluates the very same weight
// expression for each (i, k), so <B c, g> == <c, B^T g> up to float sums.
//
// Layout: coefficients (mx, my, mz, C) and fields (nx, ny, nz, C), float32,
// planar (component c is the volume at offset c * nx * ny * nz; C = 1 may
// also be passed as rank 3), in the stream's backend memory.
//
// Tolerance CUDA vs CPU (bspline_field_test.cc): relative L2 <= 1e-5 (float
// sums in the same order; weights in double, contraction aside).
#ifndef TESSERA_KERNELS_REGISTRATION_BSPLINE_FIELD_H_
#define TESSERA_KERNELS_REGISTRATION_BSPLINE_FIELD_H_

#include <array>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/registration/workspace.h"

namespace tessera {
namespace registration {

struct BsplineAxis {
  int64_t voxels = 1;              // n >= 1
  double voxels_per_control = 1;   // S > 0
  int64_t controls = 4;            // m = floor((n - 1) / S) + 4
};
using BsplineGrid = std::array<BsplineAxis, 3>;  // x, y, z

// The axis covering `voxels` with a control point every `voxels_per_control`
// voxels. INVALID_ARGUMENT for voxels < 1, a non-finite or non-positive S, or
// a grid of more than 2^31 control points.
absl::StatusOr<BsplineAxis> MakeBsplineAxis(int64_t voxels, double voxels_per_control);

// field (nx, ny, nz, C) = B coeffs (mx, my, mz, C). `workspace` (optional)
// holds the two intermediate arrays (nx * my * mz and nx * ny * mz per
// component) across calls. Asynchronous on a CUDA stream when a workspace
// is given.
absl::Status BsplineEvaluate(const BsplineGrid& grid, const NDArray& coeffs, NDArray* field, const Stream& stream,
                             Workspace* workspace = nullptr);

// coeffs (mx, my, mz, C) = B^T field (nx, ny, nz, C): overwritten, not
// accumulated into. Same scratch as BsplineEvaluate.
absl::Status BsplineAdjoint(const BsplineGrid& grid, const NDArray& field, NDArray* coeffs, const Stream& stream,
                            Workspace* workspace = nullptr);

// Exact refinement to half the control spacing (B-spline subdivision: the
// fine grid's spline equals the coarse one everywhere on the voxels), for
// coarse-to-fine schedules: fine (m'x, m'y, m'z, C) from coarse (mx, my, mz,
// C), fine control k' at the coarse position (k' - 1) / 2 + 1 (so both grids
// must put control 1 on voxel 0 and differ by exactly 2x in spacing, which
// the caller ensures; only the control counts are read here). Coarse
// controls outside the grid count as 0, as in the coarse spline itself.
absl::Status BsplineRefine(const NDArray& coarse, NDArray* fine, const Stream& stream,
                           Workspace* workspace = nullptr);

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_BSPLINE_FIELD_H_
