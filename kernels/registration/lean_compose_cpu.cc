// CPU reference of the fused in-place greedy composition (lean_compose.h):
// one slab at a time, threaded over the slab's voxels.
#include "kernels/registration/lean_compose.h"
#include "kernels/registration/lean_compose_math.h"
#include "kernels/registration/parallel.h"

namespace tessera {
namespace registration {
namespace lean_internal {

namespace {

template <typename GradT>
void ComposeSlab(const ComposeParams& p, const float* u, const GradT* grad, int64_t z0, int64_t z1, float* slab_out) {
  const int64_t plane = p.dims.nx * p.dims.ny;
  const int64_t count = (z1 - z0) * plane;
  ParallelFor(count, [&](int64_t b, int64_t e, int) {
    // (i, j, k) of the chunk's first voxel, then stepped along (issue 38:
    // not three 64-bit divisions per voxel).
    const int64_t first = z0 * plane + b;
    int64_t i = first % p.dims.nx;
    int64_t j = (first / p.dims.nx) % p.dims.ny;
    int64_t k = first / plane;
    for (int64_t t = b; t < e; ++t) {
      ComposeVoxel(p, u, grad, i, j, k, z0 * plane + t, slab_out + t, count);
      if (++i == p.dims.nx) {
        i = 0;
        if (++j == p.dims.ny) {
          j = 0;
          ++k;
        }
      }
    }
  });
}

}  // namespace

void ComposeSlabCpu(const ComposeParams& p, const float* u, const float* grad, int64_t z0, int64_t z1,
                    float* slab_out) {
  ComposeSlab(p, u, grad, z0, z1, slab_out);
}

void ComposeSlabCpu(const ComposeParams& p, const float* u, const BFloat16* grad, int64_t z0, int64_t z1,
                    float* slab_out) {
  ComposeSlab(p, u, grad, z0, z1, slab_out);
}

}  // namespace lean_internal
}  // namespace registration
}  // namespace tessera
