// Deterministic two-stage sums for the registration kernels (CUDA only).
//
// Stage 1: each block reduces its threads' values (double) in a fixed tree
// and writes one partial per value to partials[v * num_blocks + block].
// Stage 2: FinishPartialsKernel sums each value's partials in a fixed order
// and writes scale * sum as float (FinishPartials). No atomics, so results depend only on the
// launch shape, never on scheduling.
#ifndef TESSERA_KERNELS_REGISTRATION_REDUCE_CUH_
#define TESSERA_KERNELS_REGISTRATION_REDUCE_CUH_

#include <cuda_runtime.h>

#include <cstdint>

namespace tessera {
namespace registration {
namespace cuda_detail {

__device__ __forceinline__ double WarpSum(double v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// Sums N values over the whole block (blockDim.x * blockDim.y * blockDim.z
// threads, a multiple of 32, at most 1024). Every thread must call it. The
// result is valid in thread 0 only. `scratch` is shared memory of at least
// 32 * N doubles.
template <int N>
__device__ __forceinline__ void BlockSum(double (&v)[N], double* scratch) {
  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int nthreads = blockDim.x * blockDim.y * blockDim.z;
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int nwarps = nthreads >> 5;
#pragma unroll
  for (int i = 0; i < N; ++i) v[i] = WarpSum(v[i]);
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) scratch[i * 32 + warp] = v[i];
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      double s = lane < nwarps ? scratch[i * 32 + lane] : 0.0;
      v[i] = WarpSum(s);
    }
  }
  __syncthreads();  // scratch may be reused by the caller
}

// Stage 2 on `stream`: out[v] = float(scale * sum_b partials[v * num_blocks + b])
// for v in [0, num_values), one block per value. Returns the launch error.
cudaError_t FinishPartials(const double* partials, int64_t num_blocks, int num_values, double scale, float* out,
                           cudaStream_t stream);

// Per-z-slice sums (issue 39, slice_sums.h) on `stream`: partials[k *
// per_slice + b] are slice k's block sums (each a fixed tree over a fixed
// part of the slice); slice_sums[k] (nz doubles, device memory) = their sum in
// ascending b, and, when `out` is given, out[0] = float(sign * (S / divisor))
// with S the slice sums added in ascending k (SumOfSlices): the same bits as
// the host's SumOfSlices of those slice sums divided by `divisor`, whatever
// z-slab of the volume the slices were computed on. One block per slice,
// then one thread for the total.
cudaError_t FinishSlices(const double* partials, int64_t nz, int64_t per_slice, double* slice_sums, double sign,
                         double divisor, float* out, cudaStream_t stream);

}  // namespace cuda_detail
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_REDUCE_CUH_
