// CPU reference for gaussian_smooth.h (also the CPU backend). Each pass
// filters lines in place through a per-thread line buffer (so in == out is
// fine), threaded over z-slabs (x and y passes, every component) or y-rows
// (z pass).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/registration/cpu_clones.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/gaussian_smooth_internal.h"
#include "kernels/registration/reg_parallel.h"

namespace tessera {
namespace registration {
namespace gs_internal {
namespace {

using reg_internal::ParallelFor;

inline int64_t Clamp(int64_t v, int64_t hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

// The row loops below are cloned per ISA level (AVX-512, AVX2, baseline) and
// the clone is picked at load time (issue 38: with 37 taps at the 1 mm
// level's gradient sigma the passes are arithmetic-bound, and the baseline
// clone runs 4 floats per instruction where AVX-512 runs 16). Every clone
// does the same float operations per voxel (element-wise: no reduction is
// reordered, no FMA: -ffp-contract=off), so all give the same values.

// 16 floats as one GCC vector (one AVX-512 register, two AVX2 or four SSE
// ones): element-wise arithmetic, so the same floats on every ISA level.
typedef float Floats16 __attribute__((vector_size(64)));
// Load16 is always inlined: its by-value vector return never crosses an ABI.
#pragma GCC diagnostic ignored "-Wpsabi"

__attribute__((always_inline)) inline Floats16 Load16(const float* p) {
  Floats16 v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// One block of 64 outputs from i0 (four 16-lane accumulators: enough
// independent adds to hide their latency) or of 16.
__attribute__((always_inline)) inline void Block64(float* __restrict out, const float* const* srcs,
                                                   const float* __restrict taps, int ntaps, int64_t i0) {
  Floats16 a0 = {}, a1 = {}, a2 = {}, a3 = {};
  for (int d = 0; d < ntaps; ++d) {
    const float w = taps[d];
    const float* src = srcs[d] + i0;
    a0 += w * Load16(src);
    a1 += w * Load16(src + 16);
    a2 += w * Load16(src + 32);
    a3 += w * Load16(src + 48);
  }
  std::memcpy(out + i0, &a0, sizeof(a0));
  std::memcpy(out + i0 + 16, &a1, sizeof(a1));
  std::memcpy(out + i0 + 32, &a2, sizeof(a2));
  std::memcpy(out + i0 + 48, &a3, sizeof(a3));
}

__attribute__((always_inline)) inline void Block16(float* __restrict out, const float* const* srcs,
                                                   const float* __restrict taps, int ntaps, int64_t i0) {
  Floats16 a0 = {};
  for (int d = 0; d < ntaps; ++d) a0 += taps[d] * Load16(srcs[d] + i0);
  std::memcpy(out + i0, &a0, sizeof(a0));
}

// out[i] = sum_d taps[d] * srcs[d][i], d = 0..ntaps-1 ascending from 0 (the
// per-voxel dot product's rounding). Blocks of 64 outputs stay in registers
// across the taps, so each tap costs a load and a multiply and an add per
// voxel, not also a load and a store of the output. A row that is not a
// multiple of the block ends with a block that overlaps the previous one
// (issue 38): its outputs are recomputed with the same values (out never
// aliases srcs), where a 16-wide and a scalar tail took 3x the row's time at
// nx = 181 (one dependent add chain instead of four).
__attribute__((always_inline)) inline void WeightedRowSum(float* __restrict out, const float* const* srcs,
                                                         const float* __restrict taps, int ntaps, int64_t nx) {
  if (nx >= 64) {
    for (int64_t i0 = 0;; i0 += 64) {
      if (i0 + 64 > nx) i0 = nx - 64;
      Block64(out, srcs, taps, ntaps, i0);
      if (i0 + 64 == nx) return;
    }
  }
  if (nx >= 16) {
    for (int64_t i0 = 0;; i0 += 16) {
      if (i0 + 16 > nx) i0 = nx - 16;
      Block16(out, srcs, taps, ntaps, i0);
      if (i0 + 16 == nx) return;
    }
  }
  for (int64_t i = 0; i < nx; ++i) {
    float a = 0.f;
    for (int d = 0; d < ntaps; ++d) a += taps[d] * srcs[d][i];
    out[i] = a;
  }
}

// kRows adjacent output rows a.. of a y or z pass, kVec * 16 outputs each,
// from the 2r + kRows source rows rows[q] = row a - r + q (clamped): output
// row p sums taps[q - p] * rows[q] over q = p..p+2r, ascending from 0 as
// WeightedRowSum does; each source row is loaded once for all of them
// (issue 38).
template <int kRows, int kVec>
__attribute__((always_inline)) inline void BlockRows(float* const* out, const float* const* rows,
                                                     const float* __restrict taps, int ntaps, int64_t i0) {
  Floats16 acc[kRows][kVec] = {};
  for (int q = 0; q < ntaps + kRows - 1; ++q) {
    const float* src = rows[q] + i0;
    Floats16 s[kVec];
    for (int v = 0; v < kVec; ++v) s[v] = Load16(src + 16 * v);
    for (int p = 0; p < kRows; ++p) {
      const int d = q - p;
      if (d < 0 || d >= ntaps) continue;
      const float w = taps[d];
      for (int v = 0; v < kVec; ++v) acc[p][v] += w * s[v];
    }
  }
  for (int p = 0; p < kRows; ++p) {
    for (int v = 0; v < kVec; ++v) std::memcpy(out[p] + i0 + 16 * v, &acc[p][v], sizeof(Floats16));
  }
}

// One x-row: row[i] = sum_d taps[d] * line[i + d], d = 0..2r from 0.
TESSERA_REGISTRATION_CLONES void FilterLineX(float* __restrict row, const float* __restrict line,
                                       const float* __restrict taps, int r, int64_t nx) {
  const float* srcs[2 * kGaussianMaxRadius + 1];
  for (int d = 0; d <= 2 * r; ++d) srcs[d] = line + d;
  WeightedRowSum(row, srcs, taps, 2 * r + 1, nx);
}

// The x pass of one z-plane's rows. Taps outermost, voxels innermost: each
// output still sums its taps in order d = 0..2r from 0 (the same rounding as
// a per-voxel dot product), but the inner loop runs along the row and
// vectorizes (a per-voxel float reduction does not without -ffast-math).
void PlaneX(float* plane, const Grid& g, const std::vector<float>& taps, std::vector<float>& line) {
  const int r = static_cast<int>(taps.size() / 2);
  for (int64_t j = 0; j < g.ny; ++j) {
    float* row = plane + g.nx * j;
    // The row with r copies of its end voxels on either side.
    for (int64_t i = 0; i < r; ++i) line[i] = row[0];
    std::memcpy(line.data() + r, row, g.nx * sizeof(float));
    for (int64_t i = 0; i < r; ++i) line[g.nx + r + i] = row[g.nx - 1];
    FilterLineX(row, line.data(), taps.data(), r, g.nx);
  }
}

// Filters along an axis of length n with element stride `stride` (in units of
// whole x-rows of nx floats) for a plane of rows: buf holds the n rows.
TESSERA_REGISTRATION_CLONES void FilterRowsOf(float* base, int64_t nx, int64_t n, int64_t stride,
                                        const float* __restrict taps, int r, float* __restrict buf) {
  for (int64_t a = 0; a < n; ++a) std::memcpy(&buf[a * nx], base + a * stride, nx * sizeof(float));
  const float* srcs[2 * kGaussianMaxRadius + 8];
  const int ntaps = 2 * r + 1;
  // Four output rows of 64 per block (16 accumulators; each source row
  // loaded once for the four): 88 -> 61-70 ms for a sigma-6 1 mm field on
  // one core (two rows: 68-90, eight rows of 16: 82-108).
  constexpr int kR = 4, kV = 4, kW = 16 * kV;
  int64_t a = 0;
  if (nx >= kW) {
    for (; a + kR <= n; a += kR) {
      for (int q = 0; q < ntaps + kR - 1; ++q) srcs[q] = &buf[Clamp(a - r + q, n - 1) * nx];
      float* out[kR];
      for (int p = 0; p < kR; ++p) out[p] = base + (a + p) * stride;
      for (int64_t i0 = 0;; i0 += kW) {
        if (i0 + kW > nx) i0 = nx - kW;
        BlockRows<kR, kV>(out, srcs, taps, ntaps, i0);
        if (i0 + kW == nx) break;
      }
    }
  }
  for (; a < n; ++a) {
    for (int d = -r; d <= r; ++d) srcs[d + r] = &buf[Clamp(a + d, n - 1) * nx];
    WeightedRowSum(base + a * stride, srcs, taps, ntaps, nx);
  }
}

void FilterRows(float* base, int64_t nx, int64_t n, int64_t stride, const std::vector<float>& taps,
                std::vector<float>& buf) {
  FilterRowsOf(base, nx, n, stride, taps.data(), static_cast<int>(taps.size() / 2), buf.data());
}

// The x and y passes of every component, one z-plane at a time (a plane's y
// pass needs only that plane's x pass): one fork-join instead of one per
// pass and component, and the plane still in cache for its y pass (issue 38:
// the coarse levels' smoothing was mostly thread starts).
void PassesXY(float* v, const Grid& g, const std::vector<float>& tx, const std::vector<float>& ty) {
  const bool x = tx.size() > 1, y = ty.size() > 1;
  if (!x && !y) return;
  ParallelFor(g.nz, 1, [&](int64_t z0, int64_t z1) {
    std::vector<float> line(x ? g.nx + 2 * (tx.size() / 2) : 0), buf(y ? g.nx * g.ny : 0);
    for (int64_t k = z0; k < z1; ++k) {
      for (int64_t c = 0; c < g.comps; ++c) {
        float* plane = v + c * g.voxels() + g.nx * g.ny * k;
        if (x) PlaneX(plane, g, tx, line);
        if (y) FilterRows(plane, g.nx, g.ny, g.nx, ty, buf);
      }
    }
  });
}

// The z pass of every component, threaded over y.
void PassZ(float* v, const Grid& g, const std::vector<float>& taps) {
  if (taps.size() <= 1) return;
  ParallelFor(g.ny, 1, [&](int64_t y0, int64_t y1) {
    std::vector<float> buf(g.nx * g.nz);
    for (int64_t j = y0; j < y1; ++j) {
      for (int64_t c = 0; c < g.comps; ++c) {
        FilterRows(v + c * g.voxels() + g.nx * j, g.nx, g.nz, g.nx * g.ny, taps, buf);
      }
    }
  });
}

}  // namespace

void SmoothCpu(const float* in, float* out, const Grid& g, const std::vector<float> taps[3]) {
  const int64_t n = g.voxels() * g.comps;
  if (in != out) std::memcpy(out, in, n * sizeof(float));
  PassesXY(out, g, taps[0], taps[1]);
  PassZ(out, g, taps[2]);
}

void ResampleCpu(const float* in, const Grid& gi, float* out, const Grid& go, const float scale[3]) {
  ParallelFor(go.nz, 1, [&](int64_t z0, int64_t z1) {
    for (int64_t k = z0; k < z1; ++k) {
      const double z = AlignedCoord(k, gi.nz, go.nz);
      const int64_t k0 = std::min<int64_t>(static_cast<int64_t>(std::floor(z)), gi.nz - 1);
      const int64_t k1 = std::min<int64_t>(k0 + 1, gi.nz - 1);
      const float fz = static_cast<float>(z - k0);
      for (int64_t j = 0; j < go.ny; ++j) {
        const double y = AlignedCoord(j, gi.ny, go.ny);
        const int64_t j0 = std::min<int64_t>(static_cast<int64_t>(std::floor(y)), gi.ny - 1);
        const int64_t j1 = std::min<int64_t>(j0 + 1, gi.ny - 1);
        const float fy = static_cast<float>(y - j0);
        for (int64_t i = 0; i < go.nx; ++i) {
          const double x = AlignedCoord(i, gi.nx, go.nx);
          const int64_t i0 = std::min<int64_t>(static_cast<int64_t>(std::floor(x)), gi.nx - 1);
          const int64_t i1 = std::min<int64_t>(i0 + 1, gi.nx - 1);
          const float fx = static_cast<float>(x - i0);
          for (int64_t c = 0; c < go.comps; ++c) {
            const float* v = in + c * gi.voxels();
            auto at = [&](int64_t a, int64_t b, int64_t d) { return v[a + gi.nx * (b + gi.ny * d)]; };
            const float c00 = at(i0, j0, k0) + fx * (at(i1, j0, k0) - at(i0, j0, k0));
            const float c10 = at(i0, j1, k0) + fx * (at(i1, j1, k0) - at(i0, j1, k0));
            const float c01 = at(i0, j0, k1) + fx * (at(i1, j0, k1) - at(i0, j0, k1));
            const float c11 = at(i0, j1, k1) + fx * (at(i1, j1, k1) - at(i0, j1, k1));
            const float c0 = c00 + fy * (c10 - c00);
            const float c1 = c01 + fy * (c11 - c01);
            const float s = c < 3 ? scale[c] : 1.f;
            out[i + go.nx * (j + go.ny * k) + c * go.voxels()] = s * (c0 + fz * (c1 - c0));
          }
        }
      }
    }
  });
}

}  // namespace gs_internal
}  // namespace registration
}  // namespace tessera
