// The per-voxel determinant shared by jacobian_cpu.cc and jacobian.cu.
// Internal to kernels/registration.
#ifndef TESSERA_KERNELS_REGISTRATION_JACOBIAN_INTERNAL_H_
#define TESSERA_KERNELS_REGISTRATION_JACOBIAN_INTERNAL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "kernels/registration/jacobian.h"

#if defined(__CUDACC__)
#define TESSERA_JAC_HD __host__ __device__ __forceinline__
#else
#define TESSERA_JAC_HD inline
#endif

namespace tessera {
namespace registration {
namespace jac_internal {

struct Field {
  const float* u;   // planar (nx, ny, nz, 3)
  int64_t n[3];     // nx, ny, nz
  float scale[3];   // per component: to voxel units
};

// det(I + du/dx) at voxel (i, j, k); see jacobian.h for the differences.
template <typename T>
TESSERA_JAC_HD T DetAt(const Field& f, int64_t i, int64_t j, int64_t k) {
  const int64_t nx = f.n[0], ny = f.n[1], nz = f.n[2];
  const int64_t V = nx * ny * nz;
  const int64_t idx = i + nx * (j + ny * k);
  const int64_t q[3] = {i, j, k};
  const int64_t stride[3] = {1, nx, nx * ny};
  T J[3][3];
  for (int d = 0; d < 3; ++d) {
    int64_t lo = idx, hi = idx;
    T inv = T(0);
    if (f.n[d] > 1) {
      if (q[d] == 0) {
        hi = idx + stride[d];
        inv = T(1);
      } else if (q[d] == f.n[d] - 1) {
        lo = idx - stride[d];
        inv = T(1);
      } else {
        lo = idx - stride[d];
        hi = idx + stride[d];
        inv = T(0.5);
      }
    }
    for (int c = 0; c < 3; ++c) {
      J[c][d] = (T(f.u[hi + c * V]) - T(f.u[lo + c * V])) * inv * T(f.scale[c]) + (c == d ? T(1) : T(0));
    }
  }
  return J[0][0] * (J[1][1] * J[2][2] - J[1][2] * J[2][1]) - J[0][1] * (J[1][0] * J[2][2] - J[1][2] * J[2][0]) +
         J[0][2] * (J[1][0] * J[2][1] - J[1][1] * J[2][0]);
}

JacobianSummary JacobianCpu(const Field& f, float* det);
#if TESSERA_WITH_CUDA
absl::StatusOr<JacobianSummary> JacobianCuda(const Field& f, float* det, const Stream& stream);
#endif

}  // namespace jac_internal
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_JACOBIAN_INTERNAL_H_
