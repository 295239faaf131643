// Row kernel of the CPU greedy composition's vector paths (issue 38),
// internal to lean_compose_cpu.cc: the trilinear sample of u's three
// components at every row voxel whose cell lies inside the field, plus the
// step, in ComposeVoxel's operations and order (lean_compose_math.h). Cells
// that touch the field's edges are flagged for the scalar code.
#ifndef TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_CPU_ROWS_H_
#define TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_CPU_ROWS_H_

#include <cstdint>

#include "kernels/registration/grid_sampler_cpu_path.h"
#include "kernels/registration/lean_compose.h"

namespace tessera {
namespace registration {
namespace lean_internal {

struct ComposeRowField {
  const float* u;  // planar, n voxels per component
  int64_t n;
  int32_t nx, ny, nz;  // the field's (slab's) dims
  float z0;            // ComposeParams::grid_z0: the field's slice 0 in the grid's coordinates
};

// out_c[i] = trilinear(u_c at (ix0, ix1, ix2)[i]) + s_c[i] where inside[i] != 0
// (ix already clamped; lower corner in [0, n - 2] per axis, z after
// subtracting z0); other voxels are left for the scalar code.
void ComposeRow(SamplerCpuPath path, const ComposeRowField& f, int64_t nx, const float* ix0, const float* ix1,
                const float* ix2, const float* s0, const float* s1, const float* s2, float* out0, float* out1,
                float* out2, int32_t* inside);

// ComposeSlabCpu (float gradient) on a given path (ResolveSamplerCpuPath's
// choice; kScalar: ComposeVoxel per voxel, the reference). Same floats on
// every path, m and v included.
void ComposeSlabCpuOnPath(SamplerCpuPath path, const ComposeParams& p, const float* u, const float* grad, int64_t z0,
                          int64_t z1, float* slab_out);

}  // namespace lean_internal
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_CPU_ROWS_H_
