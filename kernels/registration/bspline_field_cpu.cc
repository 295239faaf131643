// CPU reference of bspline_field.h's passes (also the CPU backend): each
// output row of `inner` contiguous values gathers its taps in increasing
// input order, as the CUDA kernel does per element.
#include <algorithm>

#include "kernels/registration/bspline_field_internal.h"
#include "kernels/registration/reg_parallel.h"

namespace tessera {
namespace registration {
namespace cpu {

void BsplinePass(const bspline_internal::Pass& p, const float* in, float* out) {
  const int64_t rows = p.n_out * p.outer;
  // Rows of one value (x passes) are cheap: hand out many per chunk.
  const int64_t min_rows = std::max<int64_t>(1, 4096 / std::max<int64_t>(p.inner, 1));
  reg_internal::ParallelFor(rows, min_rows, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r % p.n_out, outer = r / p.n_out;
      float* dst = out + p.inner * r;
      std::fill(dst, dst + p.inner, 0.f);
      int64_t lo = 0, hi = -1;
      bspline_internal::TapRange(p, o, &lo, &hi);
      for (int64_t i = lo; i <= hi; ++i) {
        const float w = bspline_internal::TapWeight(p, o, i);
        if (w == 0.f) continue;
        const float* src = in + p.inner * (i + p.n_in * outer);
        for (int64_t j = 0; j < p.inner; ++j) dst[j] += w * src[j];
      }
    }
  });
}

}  // namespace cpu
}  // namespace registration
}  // namespace tessera
