// CPU reference for AdamStep (also the CPU backend): the element update of
// adam_internal.h over contiguous ranges on threads.
#include <cmath>

#include "kernels/registration/adam_internal.h"
#include "kernels/registration/reg_parallel.h"

namespace tessera {
namespace registration {
namespace adam_internal {

void AdamCpu(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoefficients& c) {
  reg_internal::ParallelFor(n, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) AdamUpdate(c, g[i], p[i], m[i], v[i]);
  });
}

}  // namespace adam_internal
}  // namespace registration
}  // namespace tessera
