// The CPU composition's row kernel (lean_compose_cpu_rows.h) per ISA level:
// the cell loop of lean_compose_cpu_cells.inc over the vector types of
// cpu_vector_avx2.inc / cpu_vector_avx512.inc, each compiled for its level;
// the caller picks one at run time (ResolveSamplerCpuPath).
#include "kernels/registration/lean_compose_cpu_rows.h"

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessera {
namespace registration {
namespace lean_internal {

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2")
namespace compose_avx2 {
#include "kernels/registration/cpu_vector_avx2.inc"
#include "kernels/registration/lean_compose_cpu_cells.inc"
}  // namespace compose_avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC diagnostic push
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*: -Wmaybe-uninitialized noise.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx2,avx512f,avx512dq,avx512vl,avx512bw")
namespace compose_avx512 {
#include "kernels/registration/cpu_vector_avx512.inc"
#include "kernels/registration/lean_compose_cpu_cells.inc"
}  // namespace compose_avx512
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

void ComposeRow(SamplerCpuPath path, const ComposeRowField& f, int64_t nx, const float* ix0, const float* ix1,
                const float* ix2, const float* s0, const float* s1, const float* s2, float* out0, float* out1,
                float* out2, int32_t* inside) {
#if defined(__x86_64__)
  if (path == SamplerCpuPath::kAvx512) {
    return compose_avx512::ComposeCells(f, nx, ix0, ix1, ix2, s0, s1, s2, out0, out1, out2, inside);
  }
  if (path == SamplerCpuPath::kAvx2) {
    return compose_avx2::ComposeCells(f, nx, ix0, ix1, ix2, s0, s1, s2, out0, out1, out2, inside);
  }
#endif
  for (int64_t i = 0; i < nx; ++i) inside[i] = 0;  // no vector path: all scalar
}

}  // namespace lean_internal
}  // namespace registration
}  // namespace tessera
