// Direct sums with per-axis phase tables: exp(i s k.x) = prod_a exp(i s k_a x_a),
// each factor from std::polar (no recurrences, so no drift over k).
#include "kernels/reconstruction/nufft/nudft.h"

#include <algorithm>
#include <vector>

#include "common/parallel.h"

namespace tessera {
namespace recon {
namespace nufft {
namespace {

using cd = std::complex<double>;

// exp(i sign k x) for the centred k of each index 0 .. n - 1.
void PhaseRow(int64_t n, double x, int sign, cd* out) {
  const int64_t k0 = -(n / 2);
  for (int64_t i = 0; i < n; ++i) out[i] = std::polar(1.0, sign * static_cast<double>(k0 + i) * x);
}

constexpr int64_t kPointChunk = 512;

}  // namespace

void NudftType1(std::array<int64_t, 3> modes, const NudftPoints& points, int sign, int ntransforms,
                const std::complex<double>* c, std::complex<double>* f) {
  const int64_t n1 = modes[0], n2 = modes[1], n3 = points.z ? modes[2] : 1;
  const int64_t total = n1 * n2 * n3, m = points.m;
  std::fill(f, f + total * ntransforms, cd(0, 0));
  std::vector<cd> e1(kPointChunk * n1), e2(kPointChunk * n2), e3(kPointChunk * n3, cd(1, 0));
  for (int64_t j0 = 0; j0 < m; j0 += kPointChunk) {
    const int64_t nj = std::min(kPointChunk, m - j0);
    ParallelFor(nj, [&](int64_t begin, int64_t end, int) {
      for (int64_t j = begin; j < end; ++j) {
        PhaseRow(n1, points.x[j0 + j], sign, &e1[j * n1]);
        PhaseRow(n2, points.y[j0 + j], sign, &e2[j * n2]);
        if (points.z) PhaseRow(n3, points.z[j0 + j], sign, &e3[j * n3]);
      }
    });
    // Each worker owns whole (k2, k3) rows of every transform: no races, and
    // every mode sums its points in index order (deterministic).
    ParallelFor(n2 * n3, [&](int64_t begin, int64_t end, int) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t i2 = row % n2, i3 = row / n2;
        for (int t = 0; t < ntransforms; ++t) {
          cd* out = f + t * total + row * n1;
          const cd* ct = c + t * m + j0;
          for (int64_t j = 0; j < nj; ++j) {
            const cd a = ct[j] * e2[j * n2 + i2] * e3[j * n3 + i3];
            const cd* e = &e1[j * n1];
            for (int64_t i1 = 0; i1 < n1; ++i1) out[i1] += a * e[i1];
          }
        }
      }
    });
  }
}

void NudftType2(std::array<int64_t, 3> modes, const NudftPoints& points, int sign, int ntransforms,
                const std::complex<double>* f, std::complex<double>* c) {
  const int64_t n1 = modes[0], n2 = modes[1], n3 = points.z ? modes[2] : 1;
  const int64_t total = n1 * n2 * n3, m = points.m;
  ParallelFor(m, [&](int64_t begin, int64_t end, int) {
    std::vector<cd> e1(n1), e2(n2), e3(n3, cd(1, 0));
    for (int64_t j = begin; j < end; ++j) {
      PhaseRow(n1, points.x[j], sign, e1.data());
      PhaseRow(n2, points.y[j], sign, e2.data());
      if (points.z) PhaseRow(n3, points.z[j], sign, e3.data());
      for (int t = 0; t < ntransforms; ++t) {
        const cd* ft = f + t * total;
        cd sum(0, 0);
        for (int64_t i3 = 0; i3 < n3; ++i3) {
          for (int64_t i2 = 0; i2 < n2; ++i2) {
            const cd* row = ft + (i3 * n2 + i2) * n1;
            cd s(0, 0);
            for (int64_t i1 = 0; i1 < n1; ++i1) s += row[i1] * e1[i1];
            sum += s * e2[i2] * e3[i3];
          }
        }
        c[t * m + j] = sum;
      }
    }
  });
}

}  // namespace nufft
}  // namespace recon
}  // namespace tessera
