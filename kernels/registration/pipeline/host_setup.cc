#include "kernels/registration/pipeline/host_setup.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/image_preview.h"
#include "common/parallel.h"
#include "common/status.h"

namespace tessera::registration {

absl::StatusOr<NDArray> NormalizedIntensitiesParallel(const Volume& v, const char* which, MemoryKind kind,
                                                      IntensityMap* map) {
  if (kind == MemoryKind::kDevice) return absl::InvalidArgumentError("normalised intensities are host memory");
  TESSERA_ASSIGN_OR_RETURN(NDArray f, NDArray::Allocate(v.data.shape(), DType::kFloat32, kind));
  const int64_t n = f.num_elements();
  float* p = f.data<float>();
  // float32 copy, finite min/max and the non-finite count in one parallel pass.
  struct Partial {
    int64_t nonfinite = 0;
    double min = std::numeric_limits<double>::infinity();
    double max = -std::numeric_limits<double>::infinity();
  };
  std::vector<Partial> partials(ParallelChunks(std::max<int64_t>(n, 1)));
  VisitDType(v.data.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* src = v.data.data<T>();
    ParallelFor(n, [&](int64_t b, int64_t e, int chunk) {
      Partial part;
      for (int64_t i = b; i < e; ++i) {
        const float x = static_cast<float>(src[i]);
        p[i] = x;
        if (!std::isfinite(x)) {
          ++part.nonfinite;
          continue;
        }
        part.min = std::min(part.min, static_cast<double>(x));
        part.max = std::max(part.max, static_cast<double>(x));
      }
      partials[chunk] = part;
    });
  });
  Partial all;
  for (const Partial& part : partials) {
    all.nonfinite += part.nonfinite;
    all.min = std::min(all.min, part.min);
    all.max = std::max(all.max, part.max);
  }
  if (all.nonfinite > 0) {
    return absl::InvalidArgumentError(absl::StrCat(which, " image has ", all.nonfinite,
                                                   " NaN/Inf voxels; fix or mask them before registering"));
  }
  TESSERA_ASSIGN_OR_RETURN(Window w, ComputeWindow(f, 0.5, 99.5));  // sampled percentiles: cheap
  if (!(w.high > w.low)) {
    w = Window{n > 0 ? all.min : 0.0, n > 0 ? all.max : 0.0};
    if (!(w.high > w.low)) return absl::InvalidArgumentError(absl::StrCat(which, " image is constant"));
  }
  const float lo = static_cast<float>(w.low), scale = static_cast<float>(1.0 / (w.high - w.low));
  if (map != nullptr) *map = IntensityMap{lo, scale};
  ParallelFor(n, [&](int64_t b, int64_t e, int) {
    for (int64_t i = b; i < e; ++i) p[i] = std::clamp((p[i] - lo) * scale, 0.f, 1.f);
  });
  return f;
}

std::array<double, 3> CentreOfMassParallel(const NDArray& intensities, const Geometry& geometry) {
  const int64_t nx = intensities.dim(0), ny = intensities.dim(1), nz = intensities.dim(2);
  const float* p = intensities.data<float>();
  struct Sums {
    double sum = 0, si = 0, sj = 0, sk = 0;
  };
  const int64_t rows = ny * nz;
  std::vector<Sums> partials(ParallelChunks(std::max<int64_t>(rows, 1)));
  ParallelFor(rows, [&](int64_t b, int64_t e, int chunk) {
    Sums s;
    for (int64_t row = b; row < e; ++row) {
      const int64_t j = row % ny, k = row / ny;
      double row_sum = 0, row_si = 0;
      for (int64_t i = 0; i < nx; ++i) {
        const double w = p[i + nx * row];
        row_sum += w;
        row_si += w * static_cast<double>(i);
      }
      s.sum += row_sum;
      s.si += row_si;
      s.sj += row_sum * static_cast<double>(j);
      s.sk += row_sum * static_cast<double>(k);
    }
    partials[chunk] = s;
  });
  Sums all;
  for (const Sums& s : partials) {
    all.sum += s.sum;
    all.si += s.si;
    all.sj += s.sj;
    all.sk += s.sk;
  }
  if (all.sum <= 0) all.sum = 1;
  const Mat4 m = geometry.IndexToWorld();
  const double idx[3] = {all.si / all.sum, all.sj / all.sum, all.sk / all.sum};
  std::array<double, 3> out{};
  for (int r = 0; r < 3; ++r) out[r] = m[r * 4] * idx[0] + m[r * 4 + 1] * idx[1] + m[r * 4 + 2] * idx[2] + m[r * 4 + 3];
  return out;
}

}  // namespace tessera::registration
