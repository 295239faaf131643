// CPU reference of the fused in-place greedy composition (lean_compose.h):
// one slab at a time, threaded over the slab's voxels.
#include <cstdint>
#include <vector>

#include "kernels/registration/grid_sampler_cpu_path.h"
#include "kernels/registration/lean_compose.h"
#include "kernels/registration/lean_compose_cpu_rows.h"
#include "kernels/registration/lean_compose_math.h"
#include "kernels/registration/parallel.h"

namespace tessera {
namespace registration {
namespace lean_internal {

namespace {

// The vector paths (issue 38): a field whose offsets fit int32. Rows of the
// slab in parallel: the vector row kernel (steps, positions, interior cells),
// the flagged (edge) voxels by ComposeFromStep, then the row's remainder by
// ComposeVoxel.
template <typename GradT>
void ComposeSlabRows(SamplerCpuPath path, const ComposeParams& p, const float* u, const GradT* grad, int64_t z0,
                     int64_t z1, float* slab_out) {
  const int64_t nx = p.dims.nx, plane = p.dims.nx * p.dims.ny;
  const int64_t count = (z1 - z0) * plane;
  ParallelFor((z1 - z0) * p.dims.ny, [&](int64_t r0, int64_t r1, int) {
    std::vector<float> buf(6 * nx);
    std::vector<int32_t> inside(nx);
    float* const s[3] = {buf.data(), buf.data() + nx, buf.data() + 2 * nx};
    float* const ix[3] = {buf.data() + 3 * nx, buf.data() + 4 * nx, buf.data() + 5 * nx};
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t k = z0 + r / p.dims.ny, j = r % p.dims.ny;
      const int64_t idx0 = k * plane + j * nx;
      float* out = slab_out + (idx0 - z0 * plane);
      float* const outs[3] = {out, out + count, out + 2 * count};
      const int64_t done = ComposeRow(path, p, u, grad, j, k, s, ix, outs, inside.data());
      for (int64_t i = 0; i < done; ++i) {
        if (inside[i]) continue;
        const float si[3] = {s[0][i], s[1][i], s[2][i]};
        const float ixi[3] = {ix[0][i], ix[1][i], ix[2][i]};
        ComposeFromStep(p, u, si, ixi, out + i, count);
      }
      // The row's remainder: the scalar reference, voxel by voxel.
      for (int64_t i = done; i < nx; ++i) ComposeVoxel(p, u, grad, i, j, k, idx0 + i, out + i, count);
    }
  });
}

bool ComposeVectorApplies(SamplerCpuPath path, const ComposeParams& p) {
  return path != SamplerCpuPath::kScalar && 3 * p.dims.size() < (int64_t{1} << 31);
}

template <typename GradT>
void ComposeSlab(SamplerCpuPath path, const ComposeParams& p, const float* u, const GradT* grad, int64_t z0,
                 int64_t z1, float* slab_out) {
  path = ResolveSamplerCpuPath(path);
  if (ComposeVectorApplies(path, p)) return ComposeSlabRows(path, p, u, grad, z0, z1, slab_out);
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
  ComposeSlab(SamplerCpuPath::kAuto, p, u, grad, z0, z1, slab_out);
}

void ComposeSlabCpu(const ComposeParams& p, const float* u, const BFloat16* grad, int64_t z0, int64_t z1,
                    float* slab_out) {
  ComposeSlab(SamplerCpuPath::kAuto, p, u, grad, z0, z1, slab_out);
}

void ComposeSlabCpuOnPath(SamplerCpuPath path, const ComposeParams& p, const float* u, const float* grad, int64_t z0,
                          int64_t z1, float* slab_out) {
  ComposeSlab(path, p, u, grad, z0, z1, slab_out);
}

void ComposeSlabCpuOnPath(SamplerCpuPath path, const ComposeParams& p, const float* u, const BFloat16* grad,
                          int64_t z0, int64_t z1, float* slab_out) {
  ComposeSlab(path, p, u, grad, z0, z1, slab_out);
}

}  // namespace lean_internal
}  // namespace registration
}  // namespace tessera
