// Row kernel of the CPU greedy composition's vector paths (issue 38),
// internal to lean_compose_cpu.cc: the step and clamped position of every
// row voxel, and the trilinear sample of u's three components plus the step
// where the voxel's cell lies inside the field, in ComposeVoxel's operations
// and order (lean_compose_math.h). Cells that touch the field's edges are
// flagged for the scalar code.
#ifndef TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_CPU_ROWS_H_
#define TESSERA_KERNELS_REGISTRATION_LEAN_COMPOSE_CPU_ROWS_H_

#include <cstdint>

#include "kernels/registration/grid_sampler_cpu_path.h"
#include "kernels/registration/lean_compose.h"
#include "kernels/registration/storage16.h"

namespace tessera {
namespace registration {
namespace lean_internal {

struct ComposeRowField {
  const float* u;  // planar, n voxels per component
  int64_t n;
  int32_t nx, ny, nz;  // the field's (slab's) dims
  float z0;            // ComposeParams::grid_z0: the field's slice 0 in the grid's coordinates
};

// One row's step inputs: the gradient and (Adam) the moments from the row's
// first voxel, per component; the row's (j, k) in the slab's indices.
template <typename GradT>
struct ComposeRowInput {
  const GradT* grad[3];
  float* m[3];
  float* v[3];
  int64_t j, k;
};

// The row's first nx - nx % lanes voxels on a vector path: every voxel's step
// s_c and clamped position ix_c (ComposeVoxel's, Adam's m and v updated), and
// out_c[i] = trilinear(u_c at ix[i]) + s_c[i] where the cell lies inside the
// field (inside[i] != 0; lower corner in [0, n - 2] per axis, z after
// subtracting z0). Returns that count; the rest of the row and the voxels
// with inside[i] == 0 are left for the scalar code. kScalar: returns 0.
int64_t ComposeRow(SamplerCpuPath path, const ComposeParams& p, const ComposeRowField& f,
                   const ComposeRowInput<float>& row, int64_t nx, float* const s[3], float* const ix[3],
                   float* const out[3], int32_t* inside);
int64_t ComposeRow(SamplerCpuPath path, const ComposeParams& p, const ComposeRowField& f,
                   const ComposeRowInput<BFloat16>& row, int64_t nx, float* const s[3], float* const ix[3],
                   float* const out[3], int32_t* inside);

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
