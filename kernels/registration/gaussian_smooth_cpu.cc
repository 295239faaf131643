// CPU reference for gaussian_smooth.h (also the CPU backend). Each pass
// filters lines in place through a per-thread line buffer (so in == out is
// fine), threaded over z-slabs (x and y passes) or y-rows (z pass).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/registration/gaussian_smooth_internal.h"
#include "kernels/registration/reg_parallel.h"

namespace tessera {
namespace registration {
namespace gs_internal {
namespace {

using reg_internal::ParallelFor;

inline int64_t Clamp(int64_t v, int64_t hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

// x pass on one volume. Taps outermost, voxels innermost: each output still
// sums its taps in order d = 0..2r from 0 (the same rounding as a per-voxel
// dot product), but the inner loop now runs along the row and vectorizes
// (a per-voxel float reduction does not without -ffast-math; this pass was
// 13% of a CPU MI registration's time at sigma 6).
void PassX(float* v, const Grid& g, const std::vector<float>& taps) {
  const int r = static_cast<int>(taps.size() / 2);
  ParallelFor(g.nz, 1, [&](int64_t z0, int64_t z1) {
    std::vector<float> line(g.nx + 2 * r);
    for (int64_t k = z0; k < z1; ++k) {
      for (int64_t j = 0; j < g.ny; ++j) {
        float* row = v + g.nx * (j + g.ny * k);
        for (int64_t i = -r; i < g.nx + r; ++i) line[i + r] = row[Clamp(i, g.nx - 1)];
        std::fill(row, row + g.nx, 0.f);
        for (int d = 0; d <= 2 * r; ++d) {
          const float w = taps[d];
          const float* src = line.data() + d;
          for (int64_t i = 0; i < g.nx; ++i) row[i] += w * src[i];
        }
      }
    }
  });
}

// Filters along an axis of length n with element stride `stride` (in units of
// whole x-rows of nx floats) for a plane of rows: buf holds the n rows.
void FilterRows(float* base, int64_t nx, int64_t n, int64_t stride, const std::vector<float>& taps,
                std::vector<float>& buf) {
  const int r = static_cast<int>(taps.size() / 2);
  for (int64_t a = 0; a < n; ++a) std::memcpy(&buf[a * nx], base + a * stride, nx * sizeof(float));
  for (int64_t a = 0; a < n; ++a) {
    float* dst = base + a * stride;
    std::fill(dst, dst + nx, 0.f);
    for (int d = -r; d <= r; ++d) {
      const float w = taps[d + r];
      const float* src = &buf[Clamp(a + d, n - 1) * nx];
      for (int64_t i = 0; i < nx; ++i) dst[i] += w * src[i];
    }
  }
}

void PassY(float* v, const Grid& g, const std::vector<float>& taps) {
  ParallelFor(g.nz, 1, [&](int64_t z0, int64_t z1) {
    std::vector<float> buf(g.nx * g.ny);
    for (int64_t k = z0; k < z1; ++k) FilterRows(v + g.nx * g.ny * k, g.nx, g.ny, g.nx, taps, buf);
  });
}

void PassZ(float* v, const Grid& g, const std::vector<float>& taps) {
  ParallelFor(g.ny, 1, [&](int64_t y0, int64_t y1) {
    std::vector<float> buf(g.nx * g.nz);
    for (int64_t j = y0; j < y1; ++j) FilterRows(v + g.nx * j, g.nx, g.nz, g.nx * g.ny, taps, buf);
  });
}

}  // namespace

void SmoothCpu(const float* in, float* out, const Grid& g, const std::vector<float> taps[3]) {
  const int64_t n = g.voxels() * g.comps;
  if (in != out) std::memcpy(out, in, n * sizeof(float));
  for (int64_t c = 0; c < g.comps; ++c) {
    float* v = out + c * g.voxels();
    if (taps[0].size() > 1) PassX(v, g, taps[0]);
    if (taps[1].size() > 1) PassY(v, g, taps[1]);
    if (taps[2].size() > 1) PassZ(v, g, taps[2]);
  }
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
