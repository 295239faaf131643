// Element-wise helpers of the mixed-precision lean pipeline (issue 13,
// storage16.h): float <-> 16-bit conversion of volumes, the largest |value|
// of a 16-bit field (the normalized step's scale) and MSE against an fp16
// fixed image with its gradient written in place over the warped image.
// All pointers live in the stream's memory; CPU reference (also the CPU
// backend): mixed_ops_cpu.cc; CUDA: mixed_ops.cu. CUDA == CPU exactly for the
// conversions and MaxAbs; MSE's loss within 1e-6 relative, gradient 1e-6 of
// its largest value (mixed_ops_test.cc).
#ifndef TESSERA_KERNELS_REGISTRATION_MIXED_OPS_H_
#define TESSERA_KERNELS_REGISTRATION_MIXED_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/device.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/types.h"
#include "kernels/registration/workspace.h"

namespace tessera {
namespace registration {

// out[i] = FromFloat<Half>(in[i]) for n values (round to nearest even).
absl::Status ConvertToHalf(const Stream& stream, const float* in, Half* out, int64_t n);
// out[i] = ToFloat(in[i]).
absl::Status ConvertToFloat(const Stream& stream, const Half* in, float* out, int64_t n);

// max_i |ToFloat(x[i])| over n values (NaN propagates as NaN); exact on both
// backends. `workspace` holds the CUDA result word.
absl::StatusOr<float> MaxAbs(const Stream& stream, const BFloat16* x, int64_t n, Workspace* workspace = nullptr);

// loss (1 float, stream memory, may be null) = (1/N) sum (W - F)^2 with F
// stored in fp16; when want_grad, W is overwritten by dL/dW = 2 (W - F) / N
// (each voxel read before it is written).
absl::Status MseHalfFixed(const Stream& stream, const Half* fixed, float* warped, Dims3 dims, float* loss,
                          bool want_grad, Workspace* workspace = nullptr);

namespace mixed_internal {
void ConvertToHalfCpu(const float* in, Half* out, int64_t n);
void ConvertToFloatCpu(const Half* in, float* out, int64_t n);
float MaxAbsCpu(const BFloat16* x, int64_t n);
double MseHalfFixedCpu(const Half* fixed, float* warped, int64_t n, bool want_grad);
#if TESSERA_WITH_CUDA
absl::Status ConvertToHalfCuda(const float* in, Half* out, int64_t n, const Stream& stream);
absl::Status ConvertToFloatCuda(const Half* in, float* out, int64_t n, const Stream& stream);
absl::StatusOr<float> MaxAbsCuda(const BFloat16* x, int64_t n, Workspace* workspace, const Stream& stream);
absl::Status MseHalfFixedCuda(const Half* fixed, float* warped, int64_t n, float* loss, bool want_grad,
                              Workspace* workspace, const Stream& stream);
#endif
}  // namespace mixed_internal

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_MIXED_OPS_H_
