// Row kernel of the CPU greedy composition's vector paths (issue 38),
// internal to lean_compose_cpu.cc: the step and clamped position of every
// row voxel, and the trilinear sample of u's three components plus the step
// where the voxel's cell lies inside the field, in ComposeVoxel's operations
// and order (lean_compose_math.h), from the same ComposeParams (the field's
// geometry and the row's offsets are derived from them there, as
// ComposeVoxel derives them). Cells that touch the field's edges are flagged
// for the scalar code.
#ifndef TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_CPU_ROWS_H_
#define TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_CPU_ROWS_H_

#include <cstdint>

#include "kernels/registration/grid_sampler_cpu_path.h"
#include "kernels/registration/lean_compose.h"
#include "kernels/registration/storage16.h"

namespace tessera {
namespace registration {
namespace lean_internal {

// Row (j, k) of the field p.dims (k: the slab's index, as ComposeVoxel's;
// u and grad planar, p.dims.size() voxels per component; 3 p.dims.size() <
// 2^31: int32 offsets), its first nx - nx % lanes voxels on a vector path:
// every voxel's step s_c and clamped position ix_c (ComposeVoxel's, Adam's m
// and v updated), and out_c[i] = trilinear(u_c at ix[i]) + s_c[i] where the
// cell lies inside the field (inside[i] != 0; lower corner in [0, n - 2] per
// axis, z after subtracting grid_z0). Returns that count; the rest of the row
// and the voxels with inside[i] == 0 are left for the scalar code. kScalar:
// returns 0.
int64_t ComposeRow(SamplerCpuPath path, const ComposeParams& p, const float* u, const float* grad, int64_t j,
                   int64_t k, float* const s[3], float* const ix[3], float* const out[3], int32_t* inside);
int64_t ComposeRow(SamplerCpuPath path, const ComposeParams& p, const float* u, const BFloat16* grad, int64_t j,
                   int64_t k, float* const s[3], float* const ix[3], float* const out[3], int32_t* inside);

// ComposeSlabCpu on a given path (ResolveSamplerCpuPath's choice; kScalar:
// ComposeVoxel per voxel, the reference). Same floats on every path, m and v
// included.
void ComposeSlabCpuOnPath(SamplerCpuPath path, const ComposeParams& p, const float* u, const float* grad, int64_t z0,
                          int64_t z1, float* slab_out);
void ComposeSlabCpuOnPath(SamplerCpuPath path, const ComposeParams& p, const float* u, const BFloat16* grad,
                          int64_t z0, int64_t z1, float* slab_out);

}  // namespace lean_internal
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_CPU_ROWS_H_
