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

// slices[k] = partials of slice k added in order (one thread per slice), then
// thread 0 adds the slices in ascending k.
__global__ void __launch_bounds__(kSliceThreads)
    FinishSlicesKernel(const double* __restrict__ partials, int64_t nz, int64_t per_slice, double* slices,
                       double sign, double divisor, float* __restrict__ out) {
  for (int64_t k = threadIdx.x; k < nz; k += kSliceThreads) {
    const double* p = partials + k * per_slice;
    double s = 0.0;
    for (int64_t b = 0; b < per_slice; ++b) s = __dadd_rn(s, p[b]);
    slices[k] = s;
  }
  __syncthreads();
  if (out != nullptr && threadIdx.x == 0) {
    double total = 0.0;
    for (int64_t k = 0; k < nz; ++k) total = __dadd_rn(total, slices[k]);
    out[0] = static_cast<float>(sign * __ddiv_rn(total, divisor));
  }
}

}  // namespace

cudaError_t FinishSlices(const double* partials, int64_t nz, int64_t per_slice, double* slice_sums, double sign,
                         double divisor, float* out, cudaStream_t stream) {
  FinishSlicesKernel<<<1, kSliceThreads, 0, stream>>>(partials, nz, per_slice, slice_sums, sign, divisor, out);
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
