#include "services/reconstruction/phantoms/analytic_sinogram.h"

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"

namespace tessera::recon::phantoms {

void DetectorRay(const ProjectionGeometry& projection, int64_t p, double col, double row, Vec3* origin,
                 Vec3* direction) {
  const Vec3 point = projection.PixelCenter(p, col, row);
  const Vec3& s = projection.views[p].source_or_ray;
  if (projection.beam == BeamKind::kParallel) {
    *origin = point;
    *direction = s;
  } else {
    *origin = s;
    *direction = {point.x - s.x, point.y - s.y, point.z - s.z};
  }
}

absl::StatusOr<NDArray> IntegrateOverDetector(const ProjectionGeometry& projection, int supersample,
                                              const std::function<double(const Vec3&, const Vec3&)>& line) {
  if (supersample < 1 || supersample > 64) {
    return absl::InvalidArgumentError(absl::StrCat("supersample must be in [1, 64], got ", supersample));
  }
  const int64_t cols = projection.det_cols, rows = projection.det_rows, views = projection.num_views();
  TESSERA_ASSIGN_OR_RETURN(NDArray out, NDArray::Allocate({cols, rows, views}, DType::kFloat32));
  float* data = out.data<float>();
  const int s = supersample;
  const int s_row = projection.is_2d ? 1 : s;  // a 2-D detector has no extent across the plane
  const double weight = 1.0 / (static_cast<double>(s) * s_row);
  ParallelForDynamic(views * rows, /*grain=*/1, [&](int64_t begin, int64_t end, int) {
    Vec3 origin, direction;
    for (int64_t line_index = begin; line_index < end; ++line_index) {
      const int64_t p = line_index / rows, r = line_index % rows;
      for (int64_t c = 0; c < cols; ++c) {
        double sum = 0;
        for (int b = 0; b < s_row; ++b) {
          const double row = projection.is_2d ? 0.0 : r + (b + 0.5) / s - 0.5;
          for (int a = 0; a < s; ++a) {
            DetectorRay(projection, p, c + (a + 0.5) / s - 0.5, row, &origin, &direction);
            sum += line(origin, direction);
          }
        }
        data[c + cols * (r + rows * p)] = static_cast<float>(sum * weight);
      }
    }
  });
  return out;
}

absl::StatusOr<NDArray> AnalyticSinogram(const Phantom& phantom, const CtGeometry& geometry, int supersample) {
  TESSERA_RETURN_IF_ERROR(Validate(geometry));
  if (phantom.is_2d != geometry.projection.is_2d) {
    return absl::InvalidArgumentError(absl::StrCat("a ", phantom.is_2d ? "2-D" : "3-D", " phantom needs a ",
                                                   phantom.is_2d ? "2-D" : "3-D", " geometry, got ",
                                                   Describe(geometry)));
  }
  return IntegrateOverDetector(geometry.projection, supersample, [&](const Vec3& origin, const Vec3& direction) {
    return LineIntegral(phantom, origin, direction);
  });
}

}  // namespace tessera::recon::phantoms
