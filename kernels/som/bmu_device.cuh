// Device helpers of the CUDA BMU kernels (bmu.cu):
// warp top-2 merge, result write-out, fp16 widening and the 4-node weight load.
// Internal to kernels/som; included by .cu files only.
#ifndef TESSERA_KERNELS_SOM_BMU_DEVICE_CUH_
#define TESSERA_KERNELS_SOM_BMU_DEVICE_CUH_

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/som/types.h"

namespace tessera {
namespace som {
namespace cuda {
namespace bmu_device {

__device__ inline void WarpMergeTop2(Top2& t) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    Top2 o;
    o.s1 = __shfl_xor_sync(0xffffffffu, t.s1, off);
    o.i1 = __shfl_xor_sync(0xffffffffu, t.i1, off);
    o.s2 = __shfl_xor_sync(0xffffffffu, t.s2, off);
    o.i2 = __shfl_xor_sync(0xffffffffu, t.i2, off);
    t.Merge(o);
  }
}

__device__ inline void WriteTop2(const Top2& t, int64_t d, int32_t* bmu, int32_t* second, float* score) {
  bmu[d] = t.i1;
  if (second != nullptr) second[d] = t.i2 == kNoNode ? -1 : t.i2;
  if (score != nullptr) score[d] = t.s1;
}

__device__ inline float Widen(float w) { return w; }
__device__ inline float Widen(__half w) { return __half2float(w); }

// Loads 4 consecutive weights of feature v (nodes n0..n0+3; n0 % 4 == 0);
// zero past the last node. kVec: feature-major with nodes % 4 == 0, so one
// 16-byte (fp32) / 8-byte (fp16) load.
template <typename TW, bool kFeatureMajor, bool kVec>
__device__ inline void LoadQuad(const TW* __restrict__ w, int64_t m, int64_t v_count, int32_t v, int64_t n0,
                                float* q) {
  if constexpr (kFeatureMajor && kVec) {
    if (n0 >= m) {
      q[0] = q[1] = q[2] = q[3] = 0.0f;
      return;
    }
    const TW* p = w + static_cast<int64_t>(v) * m + n0;
    if constexpr (sizeof(TW) == 4) {
      const float4 x = __ldg(reinterpret_cast<const float4*>(p));
      q[0] = x.x;
      q[1] = x.y;
      q[2] = x.z;
      q[3] = x.w;
    } else {
      const uint2 x = __ldg(reinterpret_cast<const uint2*>(p));
      const __half2 lo = *reinterpret_cast<const __half2*>(&x.x);
      const __half2 hi = *reinterpret_cast<const __half2*>(&x.y);
      q[0] = __low2float(lo);
      q[1] = __high2float(lo);
      q[2] = __low2float(hi);
      q[3] = __high2float(hi);
    }
  } else {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t n = n0 + k;
      q[k] = n >= m ? 0.0f
                    : Widen(__ldg(kFeatureMajor ? w + static_cast<int64_t>(v) * m + n : w + n * v_count + v));
    }
  }
}

}  // namespace bmu_device
}  // namespace cuda
}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_BMU_DEVICE_CUH_
