// Vector paths of the CPU Mattes MI (issue 38), internal to
// mutual_info_cpu.cc: the joint histogram's and the gradient's per-voxel work
// over a range of voxels, 4 (AVX2) or 8 (AVX-512) voxels per step, picked per
// call like the grid sampler's (grid_sampler_cpu_path.h: ResolveSamplerCpuPath).
// Every lane does the scalar reference's double operations in its order
// (mutual_info_parzen.h; no FMA: -ffp-contract=off), so the histogram's
// integers and the gradient's floats are the scalar code's, bit for bit.
#ifndef TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_CPU_ROWS_H_
#define TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_CPU_ROWS_H_

#include <cstdint>

#include "kernels/registration/grid_sampler_cpu_path.h"

namespace tessera {
namespace registration {
namespace mi_rows {

// The intensity-to-bin maps of MattesMiOptions (BinCoord's lo, 1 / range and
// span = bins - 4) and the histogram's fixed-point scale 2^bits (bits <= 52).
struct Mapping {
  double f_lo, f_inv, w_lo, w_inv, span;
  int bins;
  double scale;
  bool box;  // the fixed image's window: BoxBin's (ParzenKernel::kBox) or the cubic one
};

// Adds voxels [begin, end)'s Parzen products, rounded as JointHistogramFixed
// rounds them, to h (bins x bins int64, row = fixed bin); mask may be null.
// Returns the first voxel not handled: the scalar code takes [that, end)
// (a tail shorter than the vector, or all of it on kScalar).
int64_t HistogramRange(SamplerCpuPath path, const Mapping& m, const float* fixed, const float* warped,
                       const uint8_t* mask, int64_t begin, int64_t end, int64_t* h);

// out[k] = GradientFromTable's value for voxels [begin, end) (total > 0);
// returns the first voxel not handled, as HistogramRange.
int64_t GradientRange(SamplerCpuPath path, const Mapping& m, const float* fixed, const float* warped,
                      const uint8_t* mask, const double* table, int64_t begin, int64_t end, float* out);

}  // namespace mi_rows
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_MUTUAL_INFO_CPU_ROWS_H_
