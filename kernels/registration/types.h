// Small value types shared by the registration kernels (grid sampler, LNCC,
// MSE): volume extents and raw-pointer views, usable from host and device
// code alike.
//
// Conventions (see docs/DEVELOPING.md):
// - Volumes are x-fastest: voxel (i, j, k) of a (nx, ny, nz) volume is at
//   i + nx * (j + ny * k).
// - Vector fields (displacements and their gradients) are *planar*: shape
//   (nx, ny, nz, 3) in the same first-dimension-fastest convention, so
//   component c of voxel v is at v + c * nx * ny * nz. (PyTorch's grid tensors
//   interleave the 3 components instead; ours keep every component contiguous
//   so each one can be smoothed, clipped or updated as a plain volume.)
// - Every pointer handed to a kernel lives in the memory of the stream's
//   backend: host memory for Backend::kCpu, device memory for Backend::kCuda.
#ifndef TESSERA_KERNELS_REGISTRATION_TYPES_H_
#define TESSERA_KERNELS_REGISTRATION_TYPES_H_

#include <cstdint>
#include <string>

#if defined(__CUDACC__)
#define TESSERA_HD __host__ __device__
#else
#define TESSERA_HD
#endif

namespace tessera {
namespace registration {

struct Dims3 {
  int64_t nx = 0;
  int64_t ny = 0;
  int64_t nz = 0;

  TESSERA_HD int64_t size() const { return nx * ny * nz; }
  TESSERA_HD int64_t index(int64_t i, int64_t j, int64_t k) const { return i + nx * (j + ny * k); }
  TESSERA_HD bool operator==(const Dims3& o) const { return nx == o.nx && ny == o.ny && nz == o.nz; }
  TESSERA_HD bool operator!=(const Dims3& o) const { return !(*this == o); }
};

// "181x217x181".
inline std::string DimsToString(const Dims3& d) {
  return std::to_string(d.nx) + "x" + std::to_string(d.ny) + "x" + std::to_string(d.nz);
}

// Which voxels a metric counts (issue 34, registration masks): voxel v when
// mask[v] != 0; `count` is their number (> 0, computed by the caller, e.g.
// CombineMasks in voxel_mask.h). mask == nullptr: every voxel, the unmasked
// code path. The pointer lives in the stream's backend memory.
struct VoxelMask {
  const uint8_t* mask = nullptr;
  int64_t count = 0;
  TESSERA_HD bool has(int64_t v) const { return mask == nullptr || mask[v] != 0; }
};

// Affine transforms are 12 floats: the 3x4 row-major matrix [A | t] (PyTorch's
// affine_grid `theta` layout), so p_c = sum_d A[c][d] x_d + t[c] is
// affine[4 * c + d] * x_d summed plus affine[4 * c + 3].
constexpr int kAffineParams = 12;

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_TYPES_H_
