// CUDA AdamStep: one fused, float4-vectorised elementwise kernel; see adam.h.
#include <algorithm>
#include <cstdint>

#include "common/cuda_check.h"
#include "kernels/registration/adam_internal.h"

namespace tessera {
namespace registration {
namespace adam_internal {
namespace {

struct AdamPolicySm90 {
  static constexpr int kThreads = 256;
  static constexpr int kBlocksPerSm = 8;  // grid-stride beyond this
};

__global__ void __launch_bounds__(AdamPolicySm90::kThreads)
    AdamKernel(float* __restrict__ p, const float* __restrict__ g, float* __restrict__ m, float* __restrict__ v,
               int64_t n, AdamCoefficients c, bool vec) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (vec) {
    const int64_t n4 = n / 4;
    for (int64_t i = first; i < n4; i += stride) {
      float4 P = reinterpret_cast<float4*>(p)[i];
      const float4 G = __ldg(reinterpret_cast<const float4*>(g) + i);
      float4 M = reinterpret_cast<float4*>(m)[i];
      float4 V = reinterpret_cast<float4*>(v)[i];
      AdamUpdate(c, G.x, P.x, M.x, V.x);
      AdamUpdate(c, G.y, P.y, M.y, V.y);
      AdamUpdate(c, G.z, P.z, M.z, V.z);
      AdamUpdate(c, G.w, P.w, M.w, V.w);
      reinterpret_cast<float4*>(p)[i] = P;
      reinterpret_cast<float4*>(m)[i] = M;
      reinterpret_cast<float4*>(v)[i] = V;
    }
    for (int64_t i = n4 * 4 + first; i < n; i += stride) AdamUpdate(c, g[i], p[i], m[i], v[i]);  // ragged tail
  } else {
    for (int64_t i = first; i < n; i += stride) AdamUpdate(c, g[i], p[i], m[i], v[i]);
  }
}

bool Aligned16(const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; }

}  // namespace

absl::Status AdamCuda(float* p, const float* g, float* m, float* v, int64_t n, const AdamCoefficients& c,
                      const Stream& stream) {
  using Policy = AdamPolicySm90;
  int sms = 0;
  TESSERA_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, stream.ordinal()));
  const bool vec = Aligned16(p) && Aligned16(g) && Aligned16(m) && Aligned16(v);
  const int64_t work = vec ? (n + 3) / 4 : n;
  const int blocks = int(std::max<int64_t>(
      1, std::min<int64_t>((work + Policy::kThreads - 1) / Policy::kThreads, int64_t{sms} * Policy::kBlocksPerSm)));
  AdamKernel<<<blocks, Policy::kThreads, 0, static_cast<cudaStream_t>(stream.native())>>>(p, g, m, v, n, c, vec);
  TESSERA_CUDA_RETURN_IF_LAUNCH_ERROR("AdamKernel");
  return absl::OkStatus();
}

}  // namespace adam_internal
}  // namespace registration
}  // namespace tessera
