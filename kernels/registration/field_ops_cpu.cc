// CPU reference of field_ops.h.
#include "kernels/registration/field_ops.h"

#include "common/parallel.h"

namespace tessera {
namespace registration {
namespace cpu {

void ScaleComponents(float* field, int64_t voxels, const std::array<float, 3>& factors) {
  for (int c = 0; c < 3; ++c) {
    float* comp = field + c * voxels;
    for (int64_t i = 0; i < voxels; ++i) comp[i] *= factors[c];
  }
}

void MixComponents(float* field, int64_t voxels, const std::array<double, 9>& m) {
  float* u0 = field;
  float* u1 = field + voxels;
  float* u2 = field + 2 * voxels;
  // Host fields of gigavoxel runs are tens of GB: voxel ranges in parallel.
  ParallelFor(voxels, [&](int64_t begin, int64_t end, int) {
    for (int64_t i = begin; i < end; ++i) {
      const double x = u0[i], y = u1[i], z = u2[i];
      u0[i] = static_cast<float>(m[0] * x + m[1] * y + m[2] * z);
      u1[i] = static_cast<float>(m[3] * x + m[4] * y + m[5] * z);
      u2[i] = static_cast<float>(m[6] * x + m[7] * y + m[8] * z);
    }
  });
}

void Axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace cpu
}  // namespace registration
}  // namespace tessera
