// Row kernels of the CPU grid sampler's vector paths (grid_sampler_cpu_path.h),
// internal to grid_sampler_cpu.cc. One call handles one output row (fixed j,
// k): first every voxel's continuous input position, then the trilinear value
// (or dL/du) of every voxel whose cell lies inside the image. Cells that touch
// or cross the border are flagged for the scalar code, which handles padding.
#ifndef TESSERA_KERNELS_REGISTRATION_GRID_SAMPLER_CPU_ROWS_H_
#define TESSERA_KERNELS_REGISTRATION_GRID_SAMPLER_CPU_ROWS_H_

#include <cstdint>

#include "kernels/registration/grid_sampler_cpu_path.h"

namespace tessera {
namespace registration {
namespace cpu_rows {

// The per-call constants of SamplerGeometry / GridSampleArgs a row needs.
struct RowGeometry {
  float out_lo[3];
  float out_step[3];
  float in_half[3];
  const float* affine = nullptr;  // 12 values or null (identity)
  uint64_t jitter_key = 0;
  int64_t v_offset = 0;   // SamplerGeometry::v_offset
  int64_t k_offset = 0;   // SamplerGeometry::k_offset
};

// The image a row samples: voxels stored as S (float, or fp16 bits), fewer
// than 2^31 (int32 offsets).
template <typename S>
struct RowImageT {
  const S* data;
  int32_t nx, ny, nz;
};
using RowImage = RowImageT<float>;
// An fp16-stored image (the mixed-precision stage's; storage16.h's Half bits).
using RowImageHalf = RowImageT<uint16_t>;

// ix{0,1,2}[i] for i < nx: PositionOf's continuous input index of output voxel
// (i, j, k) (k local to the slab), v0 = its flat index of voxel (0, j, k);
// disp: the planar field of n voxels per component, or null.
void RowPositions(SamplerCpuPath path, const RowGeometry& g, int64_t nx, int64_t j, int64_t k, int64_t v0,
                  const float* disp, int64_t n, float* ix0, float* ix1, float* ix2);

// out[i] = trilinear value at (ix0, ix1, ix2)[i] where inside[i] != 0 (the
// whole cell in the image); other voxels' out[i] is left for the scalar code.
void RowForward(SamplerCpuPath path, const RowImage& image, int64_t nx, const float* ix0, const float* ix1,
                const float* ix2, float* out, int32_t* inside);

void RowForward(SamplerCpuPath path, const RowImageHalf& image, int64_t nx, const float* ix0, const float* ix1,
                const float* ix2, float* out, int32_t* inside);

// gd{0,1,2}[i] = grad_out[i] * d(value)/d(ix_c) * in_half[c] (zeros padding:
// d(clamp) = 1) where inside[i] != 0; the others are left for the scalar code.
void RowBackward(SamplerCpuPath path, const RowImage& image, const float in_half[3], int64_t nx,
                 const float* ix0, const float* ix1, const float* ix2, const float* grad_out, float* gd0,
                 float* gd1, float* gd2, int32_t* inside);
void RowBackward(SamplerCpuPath path, const RowImageHalf& image, const float in_half[3], int64_t nx,
                 const float* ix0, const float* ix1, const float* ix2, const float* grad_out, float* gd0,
                 float* gd1, float* gd2, int32_t* inside);

}  // namespace cpu_rows
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_GRID_SAMPLER_CPU_ROWS_H_
