// Backend entry points behind adam.h. Internal to kernels/registration.
#ifndef TESSERA_KERNELS_REGISTRATION_ADAM_INTERNAL_H_
#define TESSERA_KERNELS_REGISTRATION_ADAM_INTERNAL_H_

#include <cmath>
#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"

namespace tessera {
namespace registration {
namespace adam_internal {

struct AdamCoefficients {
  float beta1, one_minus_beta1;
  float beta2, one_minus_beta2;
  float step;         // lr / bc1
  float inv_sqrt_bc2; // 1 / sqrt(bc2)
  float eps;
};

#if defined(__CUDACC__)
#define TESSERA_ADAM_HD __host__ __device__ __forceinline__
#else
#define TESSERA_ADAM_HD inline
#endif

// The per-element update shared by both backends.
TESSERA_ADAM_HD void AdamUpdate(const AdamCoefficients& c, float g, float& p, float& m, float& v) {
  m = c.beta1 * m + c.one_minus_beta1 * g;
  v = c.beta2 * v + c.one_minus_beta2 * (g * g);
  p = p - c.step * m / (sqrtf(v) * c.inv_sqrt_bc2 + c.eps);
}

void AdamCpu(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoefficients& c);
#if TESSERA_WITH_CUDA
absl::Status AdamCuda(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoefficients& c,
                      const Stream& stream);
#endif

}  // namespace adam_internal
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_ADAM_INTERNAL_H_
