// CPU reference of field_ops.h.
#include "kernels/registration/field_ops.h"

namespace tessera {
namespace registration {
namespace cpu {

void ScaleComponents(float* field, int64_t voxels, const std::array<float, 3>& factors) {
  for (int c = 0; c < 3; ++c) {
    float* comp = field + c * voxels;
    for (int64_t i = 0; i < voxels; ++i) comp[i] *= factors[c];
  }
}

void Axpy(float alpha, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace cpu
}  // namespace registration
}  // namespace tessera
