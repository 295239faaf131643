// Argument checks and small helpers shared by the sharded operations.
// Internal to kernels/parallel.
#ifndef TESSERA_KERNELS_REGISTRATION_SHARDED_SHARDED_INTERNAL_H_
#define TESSERA_KERNELS_REGISTRATION_SHARDED_SHARDED_INTERNAL_H_

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
#if TESSERA_WITH_CUDA
absl::Status ScaleCuda(float* p, int64_t n, float factor, const Stream& stream);  // sharded_internal.cu
#endif

}  // namespace sharded_internal
}  // namespace parallel
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_SHARDED_SHARDED_INTERNAL_H_
