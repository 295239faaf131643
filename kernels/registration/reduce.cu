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

}  // namespace

cudaError_t FinishPartials(const double* partials, int64_t num_blocks, int num_values, double scale, float* out,
                           cudaStream_t stream) {
  FinishPartialsKernel<<<num_values, kFinishThreads, 0, stream>>>(partials, num_blocks, scale, out);
  return cudaGetLastError();
}

}  // namespace cuda_detail
}  // namespace registration
}  // namespace tessera
