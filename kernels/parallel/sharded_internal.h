// Argument checks and small helpers shared by the sharded operations.
// Internal to kernels/parallel.
#ifndef TESSERA_KERNELS_PARALLEL_SHARDED_INTERNAL_H_
#define TESSERA_KERNELS_PARALLEL_SHARDED_INTERNAL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/parallel/slab.h"

namespace tessera {
namespace parallel {
namespace sharded_internal {

// INVALID_ARGUMENT naming `what` unless `a` is a float32 local array of
// `layout` with `components` components in the memory of `stream`'s backend.
absl::Status CheckLocal(const NDArray& a, const SlabLayout& layout, int components, const Stream& stream,
                        const char* what);

// INVALID_ARGUMENT unless every inner side of the slab holds >= `needed` slices.
absl::Status CheckHalo(const SlabLayout& layout, int64_t needed, const char* what);

// p[0, n) *= factor on the stream's backend.
absl::Status Scale(float* p, int64_t n, float factor, const Stream& stream);
// The Parzen mapping of registration::MattesMiOptions, as plain values (the
// .cu files see no registration headers beyond the window arithmetic).
struct MiMapping {
  int bins = 32;
  float fixed_min = 0, fixed_max = 1, warped_min = 0, warped_max = 1;
  bool fixed_box = false;  // ParzenKernel::kBox for the fixed image
};

#if TESSERA_WITH_CUDA
absl::Status ScaleCuda(float* p, int64_t n, float factor, const Stream& stream);  // sharded_internal.cu

// sharded_mi.cu: the Parzen joint histogram (B x B doubles, row = fixed bin,
// mutual_info.h's definition) of n voxels into `histogram` (device memory);
// mask may be null. Per-block float histograms in shared memory, summed over
// blocks in double in a fixed order.
absl::Status MiJointHistogramCuda(const Stream& stream, const float* fixed, const float* warped, const uint8_t* mask,
                                  int64_t n, const MiMapping& mapping, double* histogram);
// dLoss/dW of n voxels from the gradient table T (B x B floats, device memory,
// mi_cpu::Finalize's table): 0 where masked or outside the warped range.
absl::Status MiGradientCuda(const Stream& stream, const float* fixed, const float* warped, const uint8_t* mask,
                            int64_t n, const MiMapping& mapping, const float* table, float* grad);
#endif

}  // namespace sharded_internal
}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_PARALLEL_SHARDED_INTERNAL_H_
