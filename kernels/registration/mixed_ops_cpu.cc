// CPU reference (and CPU backend) of mixed_ops.h, threaded over index ranges.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/registration/mixed_ops.h"
#include "kernels/registration/parallel.h"

namespace tessera {
namespace registration {
namespace mixed_internal {

void ConvertToHalfCpu(const float* in, Half* out, int64_t n) {
  ParallelFor(n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) out[i] = FromFloat<Half>(in[i]);
  });
}

void ConvertToFloatCpu(const Half* in, float* out, int64_t n) {
  ParallelFor(n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) out[i] = ToFloat(in[i]);
  });
}

float MaxAbsCpu(const BFloat16* x, int64_t n) {
  std::vector<float> partial(ParallelChunks(n), 0.f);
  ParallelFor(n, [&](int64_t b, int64_t e, int chunk) {
    float m = 0.f;
    for (int64_t i = b; i < e; ++i) {
      const float a = std::fabs(ToFloat(x[i]));
      if (!(a <= m)) m = a;  // NaN sticks
    }
    partial[chunk] = m;
  });
  float m = 0.f;
  for (float p : partial) {
    if (!(p <= m)) m = p;
  }
  return m;
}

double MseHalfFixedCpu(const Half* fixed, float* warped, int64_t n, bool want_grad) {
  const float grad_scale = static_cast<float>(2.0 / static_cast<double>(n));
  std::vector<double> partial(ParallelChunks(n), 0.0);
  ParallelFor(n, [&](int64_t b, int64_t e, int chunk) {
    double sum = 0.0;
    for (int64_t v = b; v < e; ++v) {
      const float diff = warped[v] - ToFloat(fixed[v]);
      sum += static_cast<double>(diff) * diff;
      if (want_grad) warped[v] = grad_scale * diff;
    }
    partial[chunk] = sum;
  });
  double total = 0.0;
  for (double p : partial) total += p;
  return total / static_cast<double>(n);
}

}  // namespace mixed_internal
}  // namespace registration
}  // namespace tessera
