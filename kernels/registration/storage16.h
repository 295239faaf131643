// 16-bit storage types of the mixed-precision lean pipeline (issue 13):
// volumes are *stored* in 16 bits and every kernel loads them into float,
// computes in float (or double) and rounds only when it stores.
//
// - Half: IEEE binary16 (fp16): 10-bit mantissa (relative step 2^-11), but a
//   narrow range (largest 65504, smallest normal 6.1e-5). Used for the
//   normalised images (intensities in [0, 1]: no range problem, 4x finer than
//   bf16).
// - BFloat16: the top 16 bits of a float: float's range, 7-bit mantissa
//   (relative step 2^-8). Used for the field buffer G, whose contents (LNCC's
//   coefficients, up to ~1e7 where a window is nearly flat, and dL/du, ~1/N per
//   voxel: below 1e-9 at 1024^3) overflow or underflow fp16.
//
// Conversions round to nearest even and are bit-identical on host and device
// (CUDA's __float2half_rn / __float2bfloat16_rn), so the CPU backend stores
// exactly what the GPU stores (host fp16: common/half_float.h).
// Arrays of either type are allocated as DType::kUInt16 NDArrays.
#ifndef TESSERA_KERNELS_REGISTRATION_STORAGE16_H_
#define TESSERA_KERNELS_REGISTRATION_STORAGE16_H_

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/half_float.h"
#include "kernels/registration/types.h"

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

namespace tessera {
namespace registration {

struct Half {
  uint16_t bits;
};
struct BFloat16 {
  uint16_t bits;
};
static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "16-bit storage");

namespace storage_internal {

TESSERA_HD inline uint32_t FloatBits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  return x;
#endif
}

TESSERA_HD inline float BitsFloat(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(x);
#else
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
#endif
}

}  // namespace storage_internal

TESSERA_HD inline float ToFloat(float v) { return v; }

TESSERA_HD inline float ToFloat(BFloat16 v) { return storage_internal::BitsFloat(static_cast<uint32_t>(v.bits) << 16); }

TESSERA_HD inline float ToFloat(Half v) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(v.bits));
#else
  return HalfToFloat(v.bits);
#endif
}

// FromFloat<S>(v): v rounded to nearest even in S.
template <typename S>
TESSERA_HD S FromFloat(float v);

template <>
TESSERA_HD inline float FromFloat<float>(float v) {
  return v;
}

template <>
TESSERA_HD inline BFloat16 FromFloat<BFloat16>(float v) {
#if defined(__CUDA_ARCH__)
  return BFloat16{__bfloat16_as_ushort(__float2bfloat16_rn(v))};
#else
  // Nearest even; a NaN keeps its sign and top payload bits, made quiet. The
  // NaN case is a select, not an early return, so that loops storing bf16
  // vectorise (lncc_cpu.cc's terms run; storage16_test: the same bits as the
  // branch for every high half and the low halves that decide the rounding).
  const uint32_t x = storage_internal::FloatBits(v);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16, quiet_nan = (x >> 16) | 0x40u;
  return BFloat16{static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? quiet_nan : rounded)};
#endif
}

template <>
TESSERA_HD inline Half FromFloat<Half>(float v) {
#if defined(__CUDA_ARCH__)
  return Half{__half_as_ushort(__float2half_rn(v))};
#else
  return Half{FloatToHalf(v)};
#endif
}

#if defined(__CUDACC__)
// One stored value through the read-only data cache, as float.
__device__ __forceinline__ float LdgFloat(const float* p) { return __ldg(p); }
__device__ __forceinline__ float LdgFloat(const Half* p) {
  return ToFloat(Half{__ldg(reinterpret_cast<const unsigned short*>(p))});
}
__device__ __forceinline__ float LdgFloat(const BFloat16* p) {
  return ToFloat(BFloat16{__ldg(reinterpret_cast<const unsigned short*>(p))});
}
#endif

// Largest relative rounding error of one store (half an ulp).
template <typename S>
constexpr float StorageRelativeError() {
  return sizeof(S) == 4 ? 0.f : (sizeof(S) == 2 && std::is_same<S, Half>::value ? 1.f / 2048 : 1.f / 256);
}

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_STORAGE16_H_
