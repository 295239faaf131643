#include "bench/fdk_bench_case.h"

#include <algorithm>
#include <cmath>

#include "common/parallel.h"

namespace tessera::bench {

recon::CtGeometry FdkBenchGeometry(int64_t n, int64_t views, int64_t cols, int64_t rows) {
  const double dso = 2.0 * n, dod = 1.0 * n, magnification = (dso + dod) / dso;
  const double pixel = magnification * 1.25 * n / static_cast<double>(cols);
  const double pixel_v = magnification * 1.25 * n / static_cast<double>(rows);
  return {recon::CenteredVolume(n, n, n),
          recon::ConeBeam(recon::EvenAngles(views, 2 * M_PI), pixel, pixel_v, rows, cols, dso, dod)};
}

std::vector<float> FdkBenchSinogram(const recon::CtGeometry& g) {
  const recon::ProjectionGeometry& p = g.projection;
  std::vector<float> sino(p.sinogram_size());
  const int64_t per_view = p.det_cols * p.det_rows;
  ParallelFor(p.num_views(), [&](int64_t v0, int64_t v1, int) {
    for (int64_t v = v0; v < v1; ++v) {
      for (int64_t e = 0; e < per_view; ++e) {
        const int64_t c = e % p.det_cols, r = e / p.det_cols;
        const double x = (c - 0.5 * p.det_cols) / p.det_cols, y = (r - 0.5 * p.det_rows) / p.det_rows;
        const double smooth = std::max(0.0, 0.25 - x * x - y * y) * 400.0;
        const uint32_t h = static_cast<uint32_t>(v * per_view + e) * 2654435761u;
        sino[v * per_view + e] = static_cast<float>(smooth + ((h >> 16) & 0xff) / 256.0);
      }
    }
  });
  return sino;
}

}  // namespace tessera::bench
