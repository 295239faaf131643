// Which code path the CPU grid sampler runs (issue 38). Every path gives the
// scalar reference's floats bit for bit: the vector paths do the same IEEE
// operations per voxel in the same order (no FMA: -ffp-contract=off), only
// on 8 (AVX2) or 16 (AVX-512) voxels of a row at once, and hand the cells
// that touch the image border back to the scalar code. The choice travels
// with the call (no process-wide setting); cpu::GridSampleForward/Backward
// (grid_sampler.h) run kAuto.
#ifndef TESSERA_KERNELS_REGISTRATION_GRID_SAMPLER_CPU_PATH_H_
#define TESSERA_KERNELS_REGISTRATION_GRID_SAMPLER_CPU_PATH_H_

#include <cstdint>
#include <vector>

#include "kernels/registration/grid_sampler.h"

namespace tessera {
namespace registration {

enum class SamplerCpuPath : uint8_t {
  kAuto = 0,  // the widest vector path this CPU has (ResolveSamplerCpuPath)
  kScalar,    // one voxel at a time (the reference)
  kAvx2,      // 8 voxels of a row per step (AVX2 gathers)
  kAvx512,    // 16 voxels of a row per step (AVX-512F/DQ/VL/BW)
};

// kAuto -> kAvx512 where the CPU has AVX-512F/DQ/VL/BW, else kAvx2 where it
// has AVX2, else kScalar; a vector path the CPU lacks falls back the same way.
SamplerCpuPath ResolveSamplerCpuPath(SamplerCpuPath requested);
// kScalar plus the vector paths this CPU can run.
std::vector<SamplerCpuPath> AvailableSamplerCpuPaths();
const char* SamplerCpuPathName(SamplerCpuPath path);

namespace cpu {

// cpu::GridSampleForward / GridSampleBackward (float) on a given path. The
// vector paths cover float images: the forward with either padding, the
// backward with zeros padding, dL/du and / or dL/d[A|t] (what the deformable
// and linear stages ask; dL/d[A|t] in the scalar code's double sums, same
// order). dL/dI and border padding's backward run the scalar code whatever
// the path.
void GridSampleForwardOnPath(SamplerCpuPath path, const GridSampleArgs& args, float* out);
void GridSampleBackwardOnPath(SamplerCpuPath path, const GridSampleArgs& args, const float* grad_out,
                              const GridSampleGrads& grads);
// cpu::GridSampleForwardHalfImage / GridSampleBackwardHalfImage on a given
// path: the same cases for an fp16 image (corners converted exactly: the same
// floats as the scalar code's HalfToFloat, a signalling NaN voxel aside, which
// the hardware quiets).
void GridSampleForwardHalfImageOnPath(SamplerCpuPath path, const GridSampleArgs& args, const Half* image,
                                      float* out);
void GridSampleBackwardHalfImageOnPath(SamplerCpuPath path, const GridSampleArgs& args, const Half* image,
                                       const float* grad_out, BFloat16* grad_disp);

}  // namespace cpu
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_GRID_SAMPLER_CPU_PATH_H_
