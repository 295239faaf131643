// CUDA codebook fill: one thread per stored weight (grid-stride), writing in
// storage order so stores coalesce in either layout.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "common/cuda_check.h"
#include "common/status.h"
#include "kernels/som/codebook.h"

namespace tessera {
namespace som {
namespace cuda {
namespace {

template <typename TW>
__global__ void FillKernel(TW* __restrict__ w, int64_t nodes, int64_t features, bool feature_major, uint64_t seed,
                           const float* __restrict__ scale) {
  const int64_t total = nodes * features;
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t v = feature_major ? k / nodes : k % features;
    const int64_t i = feature_major ? k % nodes : k / features;
    const float x = RandomUnit(seed, v, i) * (scale != nullptr ? scale[v] : 1.0f);
    if constexpr (sizeof(TW) == 4) {
      w[k] = x;
    } else {
      w[k] = __float2half_rn(x);
    }
  }
}

}  // namespace

absl::Status FillRandomCodebook(const Stream& stream, const CodebookView& cb, uint64_t seed,
                                const float* feature_scale) {
  TESSERA_CUDA_RETURN_IF_ERROR(cudaSetDevice(stream.ordinal()));
  cudaStream_t s = static_cast<cudaStream_t>(stream.native());
  const int64_t total = cb.nodes * cb.features;
  const unsigned blocks = static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(65536, (total + 255) / 256)));
  const bool fm = cb.layout == CodebookLayout::kFeatureMajor;
  if (cb.type == WeightType::kFloat32) {
    FillKernel<float><<<blocks, 256, 0, s>>>(static_cast<float*>(cb.weights), cb.nodes, cb.features, fm, seed,
                                             feature_scale);
  } else {
    FillKernel<__half><<<blocks, 256, 0, s>>>(static_cast<__half*>(cb.weights), cb.nodes, cb.features, fm, seed,
                                              feature_scale);
  }
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("FillKernel");
  return absl::OkStatus();
}

}  // namespace cuda
}  // namespace som
}  // namespace tessera
