// The CPU Mattes MI's vector paths (mutual_info_cpu_rows.h): the loops of
// mutual_info_cpu_cells.inc over a double-vector type per ISA level, each
// compiled for its level; the caller picks one at run time.
#include "kernels/registration/mutual_info_cpu_rows.h"

#include <cstdint>
#include <cstring>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessera {
namespace registration {
namespace mi_rows {

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2")
namespace mi_avx2 {

// 4 doubles; masks as all-ones lanes.
struct VD {
  static constexpr int kLanes = 4;
  using D = __m256d;
  using M = __m256d;
  using I = __m128i;
  static D LoadF(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
  static void StoreD(double* p, D v) { _mm256_storeu_pd(p, v); }
  static D Set1(double v) { return _mm256_set1_pd(v); }
  static D Add(D a, D b) { return _mm256_add_pd(a, b); }
  static D Sub(D a, D b) { return _mm256_sub_pd(a, b); }
  static D Mul(D a, D b) { return _mm256_mul_pd(a, b); }
  static D Floor(D a) { return _mm256_round_pd(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
  static M Lt(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_LT_OQ); }
  static M Gt(D a, D b) { return _mm256_cmp_pd(a, b, _CMP_GT_OQ); }
  static M And(M a, M b) { return _mm256_and_pd(a, b); }
  static D Select(M m, D a, D b) { return _mm256_blendv_pd(b, a, m); }  // m ? a : b
  static M NonZero(const uint8_t* p) {
    const __m256i bytes = _mm256_set_epi64x(p[3], p[2], p[1], p[0]);
    return _mm256_castsi256_pd(
        _mm256_xor_si256(_mm256_cmpeq_epi64(bytes, _mm256_setzero_si256()), _mm256_set1_epi64x(-1)));
  }
  // (int)floor - 1 per lane; fl holds integers in int32 range.
  static void StoreStart(int32_t* p, D fl) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm_sub_epi32(_mm256_cvttpd_epi32(fl), _mm_set1_epi32(1)));
  }
  // (int)v per lane; v holds integers in int32 range.
  static void StoreIndex(int32_t* p, D v) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvttpd_epi32(v)); }
  static I LoadIndex(const int32_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
  static D Gather(const double* base, I index, M m) {
    return _mm256_mask_i32gather_pd(_mm256_setzero_pd(), base, index, m, 8);
  }
  static void StoreFloat(float* p, D v) { _mm_storeu_ps(p, _mm256_cvtpd_ps(v)); }
  static bool None(M m) { return _mm256_movemask_pd(m) == 0; }
  // p[0..4) all hold p[0]'s bits.
  static bool Uniform(const float* p) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm_movemask_epi8(_mm_cmpeq_epi32(v, _mm_shuffle_epi32(v, 0))) == 0xffff;
  }
  // Truncation of 0 <= x < 2^52 (the histogram's products: <= 2^52 * 4/9 +
  // 0.5): floor is exact, then the integer's bits through x + 2^52.
  static __m256i TruncToInt64(__m256d x) {
    const __m256d magic = _mm256_set1_pd(4503599627370496.0);  // 2^52
    const __m256d y = _mm256_add_pd(_mm256_round_pd(x, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC), magic);
    return _mm256_sub_epi64(_mm256_castpd_si256(y), _mm256_castpd_si256(magic));
  }
};

#include "kernels/registration/mutual_info_cpu_cells.inc"

}  // namespace mi_avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC diagnostic push
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*: -Wmaybe-uninitialized noise.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx2,avx512f,avx512dq,avx512vl,avx512bw")
namespace mi_avx512 {

// 8 doubles; masks as __mmask8.
struct VD {
  static constexpr int kLanes = 8;
  using D = __m512d;
  using M = __mmask8;
  using I = __m256i;
  static D LoadF(const float* p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
  static void StoreD(double* p, D v) { _mm512_storeu_pd(p, v); }
  static D Set1(double v) { return _mm512_set1_pd(v); }
  static D Add(D a, D b) { return _mm512_add_pd(a, b); }
  static D Sub(D a, D b) { return _mm512_sub_pd(a, b); }
  static D Mul(D a, D b) { return _mm512_mul_pd(a, b); }
  static D Floor(D a) { return _mm512_roundscale_pd(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC); }
  static M Lt(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_LT_OQ); }
  static M Gt(D a, D b) { return _mm512_cmp_pd_mask(a, b, _CMP_GT_OQ); }
  static M And(M a, M b) { return a & b; }
  static D Select(M m, D a, D b) { return _mm512_mask_blend_pd(m, b, a); }  // m ? a : b
  static M NonZero(const uint8_t* p) {
    return _mm_test_epi8_mask(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), _mm_set1_epi8(-1));
  }
  static void StoreStart(int32_t* p, D fl) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm256_sub_epi32(_mm512_cvttpd_epi32(fl), _mm256_set1_epi32(1)));
  }
  static void StoreIndex(int32_t* p, D v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvttpd_epi32(v));
  }
  static I LoadIndex(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static D Gather(const double* base, I index, M m) {
    return _mm512_mask_i32gather_pd(_mm512_setzero_pd(), m, index, base, 8);
  }
  static void StoreFloat(float* p, D v) { _mm256_storeu_ps(p, _mm512_cvtpd_ps(v)); }
  static bool None(M m) { return m == 0; }
  // p[0..8) all hold p[0]'s bits.
  static bool Uniform(const float* p) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm256_cmpeq_epi32_mask(v, _mm256_broadcastd_epi32(_mm256_castsi256_si128(v))) == 0xff;
  }
  static __m256i TruncToInt64(__m256d x) { return _mm256_cvttpd_epi64(x); }
};

#include "kernels/registration/mutual_info_cpu_cells.inc"

}  // namespace mi_avx512
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

int64_t HistogramRange(SamplerCpuPath path, const Mapping& m, const float* fixed, const float* warped,
                       const uint8_t* mask, int64_t begin, int64_t end, int64_t* h) {
#if defined(__x86_64__)
  if (path == SamplerCpuPath::kAvx512 || path == SamplerCpuPath::kAvx2) {
    // The odd voxels' table, added to h at the end (integers: exact).
    std::vector<int64_t> odd(static_cast<size_t>(m.bins) * m.bins, 0);
    int64_t done;
    if (path == SamplerCpuPath::kAvx512) {
      done = m.box ? mi_avx512::Histogram<true>(m, fixed, warped, mask, begin, end, h, odd.data())
                   : mi_avx512::Histogram<false>(m, fixed, warped, mask, begin, end, h, odd.data());
    } else {
      done = m.box ? mi_avx2::Histogram<true>(m, fixed, warped, mask, begin, end, h, odd.data())
                   : mi_avx2::Histogram<false>(m, fixed, warped, mask, begin, end, h, odd.data());
    }
    for (size_t e = 0; e < odd.size(); ++e) h[e] += odd[e];
    return done;
  }
#endif
  return begin;  // no vector path: all scalar
}

int64_t GradientRange(SamplerCpuPath path, const Mapping& m, const float* fixed, const float* warped,
                      const uint8_t* mask, const double* table, int64_t begin, int64_t end, float* out) {
#if defined(__x86_64__)
  if (path == SamplerCpuPath::kAvx512) {
    return m.box ? mi_avx512::Gradient<true>(m, fixed, warped, mask, table, begin, end, out)
                 : mi_avx512::Gradient<false>(m, fixed, warped, mask, table, begin, end, out);
  }
  if (path == SamplerCpuPath::kAvx2) {
    return m.box ? mi_avx2::Gradient<true>(m, fixed, warped, mask, table, begin, end, out)
                 : mi_avx2::Gradient<false>(m, fixed, warped, mask, table, begin, end, out);
  }
#endif
  return begin;
}

}  // namespace mi_rows
}  // namespace registration
}  // namespace tessera
