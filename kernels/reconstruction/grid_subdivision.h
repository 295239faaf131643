// Reconstruction on a finer grid than the one asked for (issue 36,
// ct.voxel_subdivision): the iterative CT methods solve on a grid n times
// finer per axis over the same field of view and the result is averaged over
// each n x n (x n) block back to the requested grid. A pixel model of the
// requested size cannot reproduce exact line integrals of sub-pixel edges
// (bench/results/2026-12-07-cpu-ct-tv.md: a 1.4 % data misfit floor on a
// 128^2 Shepp-Logan); the finer model shrinks that floor, and the average of
// a fine image over a coarse pixel is what the coarse pixel should hold.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_GRID_SUBDIVISION_H_
#define TESSERA_KERNELS_RECONSTRUCTION_GRID_SUBDIVISION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/reconstruction/geometry.h"

namespace tessera {
namespace recon {

// The largest factor accepted: far beyond a useful one (8^3 = 512 fine voxels
// per coarse one); the voxel limit of recon::Validate usually binds first.
constexpr int kMaxVoxelSubdivision = 64;

// The coarse grid (nx, ny, nz) and the factor per axis of the fine grid
// (nx fx, ny fy, nz fz) it averages.
struct BlockShape {
  int64_t nx = 0, ny = 0, nz = 1;
  int fx = 1, fy = 1, fz = 1;
  int64_t coarse_size() const { return nx * ny * nz; }
  int64_t fine_size() const { return coarse_size() * fx * fy * fz; }
};

// `geometry` with its volume `factor` times finer along x and y, and along z
// for 3-D (cone) geometries (2-D ones keep their one slice), over the same
// extent; the projection geometry is untouched. INVALID_ARGUMENT naming
// ct.voxel_subdivision for factor < 1 or a grid beyond what recon::Validate
// accepts.
absl::StatusOr<CtGeometry> SubdividedGeometry(const CtGeometry& geometry, int factor);

// The BlockShape that averages SubdividedGeometry(geometry, factor)'s volume
// back to geometry's.
BlockShape SubdivisionBlocks(const CtGeometry& geometry, int factor);

// out[i, j, k] = the mean of `fine` over the block at (i fx, j fy, k fz),
// x fastest in both. Each block is summed in double in the order z, y, x on
// both backends, so CPU and CUDA agree to the last bit. Pointers in the
// stream's memory; `out` must not alias `fine`.
absl::Status BlockAverage(const Stream& stream, const float* fine, const BlockShape& shape, float* out);

namespace cuda {
absl::Status BlockAverage(const Stream& stream, const float* fine, const BlockShape& shape, float* out);
}  // namespace cuda

}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_GRID_SUBDIVISION_H_
