#include "kernels/registration/reduce.cuh"

namespace tessera {
namespace registration {
namespace cuda_detail {
namespace {

constexpr int kFinishThreads = 256;

__global__ void __launch_bounds__(kFinishThreads)
    FinishPartialsKernel(const double* __restrict__ partials, int64_t num_blocks, double scale,
                         float* __restrict__ out) {
  __shared__ double scratch[32];
  const double* p = partials + blockIdx.x * num_blocks;
  double v[1] = {0.0};
  for (int64_t b = threadIdx.x; b < num_blocks; b += kFinishThreads) v[0] += p[b];
  BlockSum<1>(v, scratch);
  if (threadIdx.x == 0) out[blockIdx.x] = static_cast<float>(scale * v[0]);
}

constexpr int kSliceThreads = 256;

// slices[k] = the partials of slice k, one block per slice: thread t adds
// partials t, t + 256, ... in order (coalesced), then a fixed tree
// (BlockSum). The blocking depends only on per_slice, never on which slab
// or block produced the partials, so it gives the same bits for a volume and
// for its z-slabs (slice_sums.h).
__global__ void __launch_bounds__(kSliceThreads)
    SliceSumsKernel(const double* __restrict__ partials, int64_t per_slice, double* __restrict__ slices) {
  __shared__ double scratch[32];
  const double* p = partials + static_cast<int64_t>(blockIdx.x) * per_slice;
  double v[1] = {0.0};
  for (int64_t b = threadIdx.x; b < per_slice; b += kSliceThreads) v[0] = __dadd_rn(v[0], p[b]);
  BlockSum<1>(v, scratch);
  if (threadIdx.x == 0) slices[blockIdx.x] = v[0];
}

// out = float(sign * (the slices added in ascending k) / divisor).
__global__ void TotalOfSlicesKernel(const double* __restrict__ slices, int64_t nz, double sign, double divisor,
                                    float* __restrict__ out) {
  double total = 0.0;
  for (int64_t k = 0; k < nz; ++k) total = __dadd_rn(total, slices[k]);
  out[0] = static_cast<float>(sign * __ddiv_rn(total, divisor));
}

}  // namespace

cudaError_t FinishSlices(const double* partials, int64_t nz, int64_t per_slice, double* slice_sums, double sign,
                         double divisor, float* out, cudaStream_t stream) {
  if (nz <= 0) return cudaSuccess;
  SliceSumsKernel<<<static_cast<unsigned>(nz), kSliceThreads, 0, stream>>>(partials, per_slice, slice_sums);
  if (out != nullptr) TotalOfSlicesKernel<<<1, 1, 0, stream>>>(slice_sums, nz, sign, divisor, out);
  return cudaGetLastError();
}

cudaError_t FinishPartials(const double* partials, int64_t num_blocks, int num_values, double scale, float* out,
                           cudaStream_t stream) {
  FinishPartialsKernel<<<num_values, kFinishThreads, 0, stream>>>(partials, num_blocks, scale, out);
  return cudaGetLastError();
}

}  // namespace cuda_detail
}  // namespace registration
}  // namespace tessera
