// The CPU composition's row kernel (lean_compose_cpu_rows.h) per ISA level:
// the row loop of lean_compose_cpu_cells.inc over the vector types of
// cpu_vector_avx2.inc / cpu_vector_avx512.inc, each compiled for its level;
// the caller picks one at run time (ResolveSamplerCpuPath).
#include "kernels/registration/lean_compose_cpu_rows.h"

#include <cstdint>

#include "kernels/registration/lean_compose_math.h"

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

namespace {

template <typename GradT>
int64_t ComposeRowOn(SamplerCpuPath path, const ComposeParams& p, const float* u, const GradT* grad, int64_t j,
                     int64_t k, float* const s[3], float* const ix[3], float* const out[3], int32_t* inside) {
#if defined(__x86_64__)
  if (path == SamplerCpuPath::kAvx512) return compose_avx512::ComposeCells(p, u, grad, j, k, s, ix, out, inside);
  if (path == SamplerCpuPath::kAvx2) return compose_avx2::ComposeCells(p, u, grad, j, k, s, ix, out, inside);
#endif
  return 0;  // no vector path: all scalar
}

}  // namespace

int64_t ComposeRow(SamplerCpuPath path, const ComposeParams& p, const float* u, const float* grad, int64_t j,
                   int64_t k, float* const s[3], float* const ix[3], float* const out[3], int32_t* inside) {
  return ComposeRowOn(path, p, u, grad, j, k, s, ix, out, inside);
}

int64_t ComposeRow(SamplerCpuPath path, const ComposeParams& p, const float* u, const BFloat16* grad, int64_t j,
                   int64_t k, float* const s[3], float* const ix[3], float* const out[3], int32_t* inside) {
  return ComposeRowOn(path, p, u, grad, j, k, s, ix, out, inside);
}

}  // namespace lean_internal
}  // namespace registration
}  // namespace tessera
