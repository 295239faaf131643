#include "services/reconstruction/phantoms/rasterize.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "services/reconstruction/phantoms/unit_frame.h"

namespace tessera::recon::phantoms {
namespace {

// Index range [lo, hi) of the voxels along one axis that can meet [a, b] (mm).
void Span(double a, double b, double min, double step, int64_t n, int64_t* lo, int64_t* hi) {
  *lo = std::clamp<int64_t>(static_cast<int64_t>(std::floor((a - min) / step)), 0, n);
  *hi = std::clamp<int64_t>(static_cast<int64_t>(std::floor((b - min) / step)) + 1, 0, n);
}

}  // namespace

absl::StatusOr<NDArray> Rasterize(const Phantom& phantom, const VolumeGeometry& v, int supersample) {
  if (supersample < 1 || supersample > 16) {
    return absl::InvalidArgumentError(absl::StrCat("supersample must be in [1, 16], got ", supersample));
  }
  if (v.nx <= 0 || v.ny <= 0 || v.nz <= 0 || !(v.dx() > 0) || !(v.dy() > 0) || !(v.dz() > 0)) {
    return absl::InvalidArgumentError("rasterize: invalid volume geometry");
  }
  if (phantom.is_2d && v.nz != 1) {
    return absl::InvalidArgumentError(absl::StrCat("a 2-D phantom needs a 2-D volume (1 slice), got ", v.nz));
  }
  absl::StatusOr<NDArray> allocated = NDArray::Allocate({v.nx, v.ny, v.nz}, DType::kFloat32);
  if (!allocated.ok()) return allocated.status();
  NDArray out = *std::move(allocated);
  float* data = out.data<float>();
  std::fill(data, data + out.num_elements(), 0.0f);

  const int s = supersample;
  const int sz = phantom.is_2d ? 1 : s;
  const double weight = 1.0 / (static_cast<double>(s) * s * sz);
  std::vector<double> offset(s);  // sample positions inside a voxel, in voxels from its lower edge
  for (int a = 0; a < s; ++a) offset[a] = (a + 0.5) / s;

  for (const Ellipsoid& e : phantom.ellipsoids) {
    const UnitFrame frame(e, phantom.is_2d);
    // Bounding box: half-extent along world axis i is |row i of R diag(semi_axes)|.
    double half[3];
    const double axes[3] = {e.semi_axes.x, e.semi_axes.y, phantom.is_2d ? 0.0 : e.semi_axes.z};
    for (int i = 0; i < 3; ++i) {
      double sum = 0;
      for (int c = 0; c < 3; ++c) sum += std::pow(e.rotation[i * 3 + c] * axes[c], 2);
      half[i] = std::sqrt(sum);
    }
    int64_t x0, x1, y0, y1, z0 = 0, z1 = 1;
    Span(frame.center.x - half[0], frame.center.x + half[0], v.min_x, v.dx(), v.nx, &x0, &x1);
    Span(frame.center.y - half[1], frame.center.y + half[1], v.min_y, v.dy(), v.ny, &y0, &y1);
    if (!phantom.is_2d) Span(frame.center.z - half[2], frame.center.z + half[2], v.min_z, v.dz(), v.nz, &z0, &z1);
    if (x0 >= x1 || y0 >= y1 || z0 >= z1) continue;
    const int64_t rows = (z1 - z0) * (y1 - y0);
    // One ellipsoid at a time, its voxel rows split across threads: no two
    // threads touch the same voxel.
    ParallelFor(rows, [&](int64_t begin, int64_t end, int) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t k = z0 + r / (y1 - y0), j = y0 + r % (y1 - y0);
        for (int64_t i = x0; i < x1; ++i) {
          int inside = 0;
          for (int c = 0; c < sz; ++c) {
            const double z = phantom.is_2d ? 0.0 : v.min_z + (k + offset[c]) * v.dz();
            for (int b = 0; b < s; ++b) {
              const double y = v.min_y + (j + offset[b]) * v.dy();
              for (int a = 0; a < s; ++a) inside += frame.Contains({v.min_x + (i + offset[a]) * v.dx(), y, z});
            }
          }
          if (inside > 0) data[i + v.nx * (j + v.ny * k)] += static_cast<float>(e.value * inside * weight);
        }
      }
    }, /*min_per_chunk=*/4);
  }
  // Float sums such as 1 - 0.8 - 0.2 leave -1.5e-8 where the truth is 0; a
  // ground truth (and an activity map checked for negatives) wants the 0.
  for (int64_t i = 0; i < out.num_elements(); ++i) {
    if (std::fabs(data[i]) < 1e-6f) data[i] = 0.0f;
  }
  return out;
}

}  // namespace tessera::recon::phantoms
