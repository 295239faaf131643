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
    for (int64_t t = b; t < e; ++t) {
      const int64_t idx = z0 * plane + t;
      const int64_t i = idx % p.dims.nx;
      const int64_t j = (idx / p.dims.nx) % p.dims.ny;
      const int64_t k = idx / plane;
      ComposeVoxel(p, u, grad, i, j, k, idx, slab_out + t, count);
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
