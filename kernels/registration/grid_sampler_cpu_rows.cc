// The CPU grid sampler's row kernels (grid_sampler_cpu_rows.h). Each body is
// plain C++ written so GCC vectorizes it across the row; it is inlined into
// one wrapper per ISA level, compiled with that level's target attribute
// (AVX2; AVX-512F/DQ/VL/BW, which also vectorizes the jitter hash's 64-bit
// products), and the caller picks the wrapper at run time. The arithmetic is
// PositionOf's and Interpolate's, operation for operation (-ffp-contract=off:
// no FMA), so every path gives the scalar reference's floats.
#include "kernels/registration/grid_sampler_cpu_rows.h"

#include <cmath>
#include <cstdint>

#include "kernels/registration/voxel_jitter.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace tessera {
namespace registration {
namespace cpu_rows {
namespace {

// VoxelJitter<float> with h >> 40 (< 2^24) converted through int32: the same
// float, but a conversion AVX2 has.
__attribute__((always_inline)) inline float Jitter(uint64_t key, uint64_t v, uint64_t axis) {
  const uint64_t h = SplitMix64(key ^ SplitMix64(v * 3u + axis));
  return static_cast<float>(static_cast<int32_t>(h >> 40)) * 0x1.0p-24f - 0.5f;
}

template <bool kJitter, bool kAffine, bool kDisp>
__attribute__((always_inline)) inline void PositionsBody(const RowGeometry& g, int64_t nx, int64_t j, int64_t k,
                                                         int64_t v0, const float* __restrict disp, int64_t n,
                                                         float* __restrict ix0, float* __restrict ix1,
                                                         float* __restrict ix2) {
  // OutputCoord: x_c = lo_c + step_c * index_c.
  const float y = g.out_lo[1] + g.out_step[1] * static_cast<float>(j);
  const float z = g.out_lo[2] + g.out_step[2] * static_cast<float>(k + g.k_offset);
  const float s0 = g.out_step[0], s1 = g.out_step[1], s2 = g.out_step[2];
  const float lo0 = g.out_lo[0];
  const float h0 = g.in_half[0], h1 = g.in_half[1], h2 = g.in_half[2];
  float a[12] = {};
  if (kAffine) {
    for (int c = 0; c < 12; ++c) a[c] = g.affine[c];
  }
  const uint64_t key = g.jitter_key;
  const uint64_t vbase = static_cast<uint64_t>(v0 + g.v_offset);
  const float* __restrict u0 = kDisp ? disp + v0 : nullptr;
  const float* __restrict u1 = kDisp ? disp + v0 + n : nullptr;
  const float* __restrict u2 = kDisp ? disp + v0 + 2 * n : nullptr;
  const int32_t nx32 = static_cast<int32_t>(nx);
  for (int32_t i = 0; i < nx32; ++i) {
    float x0 = lo0 + s0 * static_cast<float>(i);
    float x1 = y, x2 = z;
    if (kJitter) {
      const uint64_t v = vbase + static_cast<uint64_t>(i);
      x0 = x0 + s0 * Jitter(key, v, 0);
      x1 = x1 + s1 * Jitter(key, v, 1);
      x2 = x2 + s2 * Jitter(key, v, 2);
    }
    float p0, p1, p2;
    if (kAffine) {
      // AffinePrefix, then PositionFromPrefix.
      p0 = ((a[0] * x0 + a[1] * x1) + a[2] * x2) + a[3];
      p1 = ((a[4] * x0 + a[5] * x1) + a[6] * x2) + a[7];
      p2 = ((a[8] * x0 + a[9] * x1) + a[10] * x2) + a[11];
    } else {
      p0 = x0;
      p1 = x1;
      p2 = x2;
    }
    if (kDisp) {
      p0 = p0 + u0[i];
      p1 = p1 + u1[i];
      p2 = p2 + u2[i];
    }
    ix0[i] = (p0 + 1.0f) * h0;
    ix1[i] = (p1 + 1.0f) * h1;
    ix2[i] = (p2 + 1.0f) * h2;
  }
}


__attribute__((always_inline)) inline void PositionsDispatch(const RowGeometry& g, int64_t nx, int64_t j, int64_t k,
                                                             int64_t v0, const float* disp, int64_t n, float* ix0,
                                                             float* ix1, float* ix2) {
  const bool jit = g.jitter_key != 0, aff = g.affine != nullptr, dsp = disp != nullptr;
#define TESSERA_ROW_POSITIONS(J, A, D) PositionsBody<J, A, D>(g, nx, j, k, v0, disp, n, ix0, ix1, ix2)
  if (jit) {
    if (aff) {
      dsp ? TESSERA_ROW_POSITIONS(true, true, true) : TESSERA_ROW_POSITIONS(true, true, false);
    } else {
      dsp ? TESSERA_ROW_POSITIONS(true, false, true) : TESSERA_ROW_POSITIONS(true, false, false);
    }
  } else {
    if (aff) {
      dsp ? TESSERA_ROW_POSITIONS(false, true, true) : TESSERA_ROW_POSITIONS(false, true, false);
    } else {
      dsp ? TESSERA_ROW_POSITIONS(false, false, true) : TESSERA_ROW_POSITIONS(false, false, false);
    }
  }
#undef TESSERA_ROW_POSITIONS
}

#if defined(__x86_64__)
#define TESSERA_ROWS_AVX2 "avx2"
#define TESSERA_ROWS_AVX512 "avx2,avx512f,avx512dq,avx512vl,avx512bw"

__attribute__((target(TESSERA_ROWS_AVX2), noinline)) void PositionsAvx2(const RowGeometry& g, int64_t nx, int64_t j,
                                                                        int64_t k, int64_t v0, const float* disp,
                                                                        int64_t n, float* ix0, float* ix1,
                                                                        float* ix2) {
  PositionsDispatch(g, nx, j, k, v0, disp, n, ix0, ix1, ix2);
}
__attribute__((target(TESSERA_ROWS_AVX512), noinline)) void PositionsAvx512(const RowGeometry& g, int64_t nx,
                                                                            int64_t j, int64_t k, int64_t v0,
                                                                            const float* disp, int64_t n, float* ix0,
                                                                            float* ix1, float* ix2) {
  PositionsDispatch(g, nx, j, k, v0, disp, n, ix0, ix1, ix2);
}
#endif

}  // namespace

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx2,f16c")  // f16c: the fp16 image's corners (every AVX2 CPU has it)
namespace avx2 {
#include "kernels/registration/cpu_vector_avx2.inc"
#include "kernels/registration/grid_sampler_cpu_cells.inc"
}  // namespace avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC diagnostic push
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*: -Wmaybe-uninitialized noise.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx2,avx512f,avx512dq,avx512vl,avx512bw")
namespace avx512 {
#include "kernels/registration/cpu_vector_avx512.inc"
#include "kernels/registration/grid_sampler_cpu_cells.inc"
}  // namespace avx512
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

void RowPositions(SamplerCpuPath path, const RowGeometry& g, int64_t nx, int64_t j, int64_t k, int64_t v0,
                  const float* disp, int64_t n, float* ix0, float* ix1, float* ix2) {
#if defined(__x86_64__)
  if (path == SamplerCpuPath::kAvx512) return PositionsAvx512(g, nx, j, k, v0, disp, n, ix0, ix1, ix2);
  if (path == SamplerCpuPath::kAvx2) return PositionsAvx2(g, nx, j, k, v0, disp, n, ix0, ix1, ix2);
#endif
  PositionsDispatch(g, nx, j, k, v0, disp, n, ix0, ix1, ix2);
}

namespace {

template <typename Image>
void RowForwardOf(SamplerCpuPath path, const Image& image, int64_t nx, const float* ix0, const float* ix1,
                  const float* ix2, float* out, int32_t* inside) {
#if defined(__x86_64__)
  if (path == SamplerCpuPath::kAvx512) return avx512::CellsForward(image, nx, ix0, ix1, ix2, out, inside);
  if (path == SamplerCpuPath::kAvx2) return avx2::CellsForward(image, nx, ix0, ix1, ix2, out, inside);
#endif
  for (int64_t i = 0; i < nx; ++i) inside[i] = 0;  // no vector path: all scalar
}

template <typename Image>
void RowBackwardOf(SamplerCpuPath path, const Image& image, const float in_half[3], int64_t nx, const float* ix0,
                   const float* ix1, const float* ix2, const float* grad_out, float* gd0, float* gd1, float* gd2,
                   int32_t* inside) {
#if defined(__x86_64__)
  if (path == SamplerCpuPath::kAvx512) {
    return avx512::CellsBackward(image, in_half, nx, ix0, ix1, ix2, grad_out, gd0, gd1, gd2, inside);
  }
  if (path == SamplerCpuPath::kAvx2) {
    return avx2::CellsBackward(image, in_half, nx, ix0, ix1, ix2, grad_out, gd0, gd1, gd2, inside);
  }
#endif
  for (int64_t i = 0; i < nx; ++i) inside[i] = 0;  // no vector path: all scalar
}

}  // namespace

void RowForward(SamplerCpuPath path, const RowImage& image, int64_t nx, const float* ix0, const float* ix1,
                const float* ix2, float* out, int32_t* inside) {
  RowForwardOf(path, image, nx, ix0, ix1, ix2, out, inside);
}

void RowForward(SamplerCpuPath path, const RowImageHalf& image, int64_t nx, const float* ix0, const float* ix1,
                const float* ix2, float* out, int32_t* inside) {
  RowForwardOf(path, image, nx, ix0, ix1, ix2, out, inside);
}

void RowBackward(SamplerCpuPath path, const RowImage& image, const float in_half[3], int64_t nx, const float* ix0,
                 const float* ix1, const float* ix2, const float* grad_out, float* gd0, float* gd1, float* gd2,
                 int32_t* inside) {
  RowBackwardOf(path, image, in_half, nx, ix0, ix1, ix2, grad_out, gd0, gd1, gd2, inside);
}

void RowBackward(SamplerCpuPath path, const RowImageHalf& image, const float in_half[3], int64_t nx,
                 const float* ix0, const float* ix1, const float* ix2, const float* grad_out, float* gd0,
                 float* gd1, float* gd2, int32_t* inside) {
  RowBackwardOf(path, image, in_half, nx, ix0, ix1, ix2, grad_out, gd0, gd1, gd2, inside);
}

}  // namespace cpu_rows

namespace {

bool CpuHasAvx512() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
  }();
  return has;
#else
  return false;
#endif
}

bool CpuHasAvx2() {
#if defined(__x86_64__)
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace

// kAuto: the widest path the CPU has. On the dev VM (AMD EPYC, AVX-512) the
// 1 mm sampler calls measured AVX-512 < AVX2 < scalar in CPU time
// (bench/results/2026-12-07-cpu-registration-1mm-after.md).
SamplerCpuPath ResolveSamplerCpuPath(SamplerCpuPath requested) {
  switch (requested) {
    case SamplerCpuPath::kScalar:
      return SamplerCpuPath::kScalar;
    case SamplerCpuPath::kAvx512:
      if (CpuHasAvx512()) return SamplerCpuPath::kAvx512;
      break;
    case SamplerCpuPath::kAvx2:
      if (CpuHasAvx2()) return SamplerCpuPath::kAvx2;
      return SamplerCpuPath::kScalar;
    case SamplerCpuPath::kAuto:
      if (CpuHasAvx512()) return SamplerCpuPath::kAvx512;
      break;
  }
  return CpuHasAvx2() ? SamplerCpuPath::kAvx2 : SamplerCpuPath::kScalar;
}

std::vector<SamplerCpuPath> AvailableSamplerCpuPaths() {
  std::vector<SamplerCpuPath> paths = {SamplerCpuPath::kScalar};
  if (CpuHasAvx2()) paths.push_back(SamplerCpuPath::kAvx2);
  if (CpuHasAvx512()) paths.push_back(SamplerCpuPath::kAvx512);
  return paths;
}

const char* SamplerCpuPathName(SamplerCpuPath path) {
  switch (path) {
    case SamplerCpuPath::kAuto:
      return "auto";
    case SamplerCpuPath::kScalar:
      return "scalar";
    case SamplerCpuPath::kAvx2:
      return "avx2";
    case SamplerCpuPath::kAvx512:
      return "avx512";
  }
  return "unknown";
}

}  // namespace registration
}  // namespace tessera
