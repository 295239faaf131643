// Internal: float / float2 (complex) arithmetic for the batched Cholesky
// kernels, so one kernel body serves real and Hermitian systems.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_LINALG_HPD_SCALAR_CUH_
#define TESSERA_KERNELS_RECONSTRUCTION_LINALG_HPD_SCALAR_CUH_

#include <cuda_runtime.h>

namespace tessera {
namespace recon {
namespace linalg {
namespace cuda_detail {

template <typename T>
__device__ __forceinline__ T Zero();
template <>
__device__ __forceinline__ float Zero<float>() {
  return 0.0f;
}
template <>
__device__ __forceinline__ float2 Zero<float2>() {
  return make_float2(0.0f, 0.0f);
}

__device__ __forceinline__ float Re(float v) { return v; }
__device__ __forceinline__ float Re(float2 v) { return v.x; }
__device__ __forceinline__ float Abs2(float v) { return v * v; }
__device__ __forceinline__ float Abs2(float2 v) { return fmaf(v.x, v.x, v.y * v.y); }
__device__ __forceinline__ float Scale(float v, float s) { return v * s; }
__device__ __forceinline__ float2 Scale(float2 v, float s) { return make_float2(v.x * s, v.y * s); }
__device__ __forceinline__ float AddReal(float v, float s) { return v + s; }
__device__ __forceinline__ float2 AddReal(float2 v, float s) { return make_float2(v.x + s, v.y); }
__device__ __forceinline__ float Sub(float a, float b) { return a - b; }
__device__ __forceinline__ float2 Sub(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }

// acc - a b
__device__ __forceinline__ float SubMul(float acc, float a, float b) { return fmaf(-a, b, acc); }
__device__ __forceinline__ float2 SubMul(float2 acc, float2 a, float2 b) {
  return make_float2(acc.x - (a.x * b.x - a.y * b.y), acc.y - (a.x * b.y + a.y * b.x));
}
// acc - a conj(b)
__device__ __forceinline__ float SubMulConj(float acc, float a, float b) { return fmaf(-a, b, acc); }
__device__ __forceinline__ float2 SubMulConj(float2 acc, float2 a, float2 b) {
  return make_float2(acc.x - (a.x * b.x + a.y * b.y), acc.y - (a.y * b.x - a.x * b.y));
}
// acc - conj(a) b
__device__ __forceinline__ float SubConjMul(float acc, float a, float b) { return fmaf(-a, b, acc); }
__device__ __forceinline__ float2 SubConjMul(float2 acc, float2 a, float2 b) {
  return make_float2(acc.x - (a.x * b.x + a.y * b.y), acc.y - (a.x * b.y - a.y * b.x));
}
// acc + a conj(b)
__device__ __forceinline__ float AddMulConj(float acc, float a, float b) { return fmaf(a, b, acc); }
__device__ __forceinline__ float2 AddMulConj(float2 acc, float2 a, float2 b) {
  return make_float2(fmaf(a.x, b.x, fmaf(a.y, b.y, acc.x)), fmaf(a.y, b.x, fmaf(-a.x, b.y, acc.y)));
}

// Element loads/stores from float words (the staging buffers are float).
template <typename T>
__device__ __forceinline__ T LoadWords(const float* p);
template <>
__device__ __forceinline__ float LoadWords<float>(const float* p) {
  return p[0];
}
template <>
__device__ __forceinline__ float2 LoadWords<float2>(const float* p) {
  return make_float2(p[0], p[1]);
}
__device__ __forceinline__ void StoreWords(float* p, float v) { p[0] = v; }
__device__ __forceinline__ void StoreWords(float* p, float2 v) {
  p[0] = v.x;
  p[1] = v.y;
}

}  // namespace cuda_detail
}  // namespace linalg
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_LINALG_HPD_SCALAR_CUH_
