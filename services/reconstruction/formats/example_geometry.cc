#include "services/reconstruction/formats/example_geometry.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tessera::recon::formats {
namespace {

constexpr double kPi = 3.14159265358979323846;

std::string Num(double d) { return nlohmann::json(d).dump(); }

}  // namespace

absl::StatusOr<std::string> ExampleGeometryJson(absl::string_view type, int64_t size, int64_t views) {
  const bool parallel = type == "parallel", fan = type == "fanflat", cone = type == "cone";
  if (!parallel && !fan && !cone) {
    return absl::InvalidArgumentError(absl::StrCat("geometry type must be parallel, fanflat or cone, got \"", type, "\""));
  }
  if (size < 4 || size > 4096) return absl::InvalidArgumentError(absl::StrCat("size must be in [4, 4096], got ", size));
  if (views > 100000) return absl::InvalidArgumentError(absl::StrCat("views must be at most 100000, got ", views));
  const double n = static_cast<double>(size);
  if (views <= 0) views = static_cast<int64_t>(std::ceil((parallel ? 0.5 : 1.0) * kPi * n));
  const double range = parallel ? kPi : 2 * kPi;
  std::vector<double> angles(views);
  for (int64_t i = 0; i < views; ++i) angles[i] = range * static_cast<double>(i) / static_cast<double>(views);

  std::string out = absl::StrCat("{\n  \"vol_geom\": {\"GridColCount\": ", size, ", \"GridRowCount\": ", size);
  if (cone) absl::StrAppend(&out, ", \"GridSliceCount\": ", size);
  absl::StrAppend(&out, "},\n  \"proj_geom\": {\n    \"type\": \"", type, "\",\n");
  // The volume's bounding circle, plus a pixel of margin, must reach the detector.
  const double radius = 0.5 * std::sqrt(2.0) * n + 1;
  if (parallel) {
    const int64_t count = static_cast<int64_t>(std::ceil(2 * radius));
    absl::StrAppend(&out, "    \"DetectorWidth\": 1.0, \"DetectorCount\": ", count, ",\n");
  } else {
    const double dso = 2 * n, dod = n, pixel = 1.5;
    const double half_width = (dso + dod) * std::tan(std::asin(radius / dso));
    const int64_t cols = static_cast<int64_t>(std::ceil(2 * half_width / pixel)) + 2;
    if (fan) {
      absl::StrAppend(&out, "    \"DetectorWidth\": ", Num(pixel), ", \"DetectorCount\": ", cols, ",\n");
    } else {
      // Rows: the volume's top and bottom faces at their nearest to the source.
      const double half_height = 0.5 * n * (dso + dod) / (dso - radius);
      const int64_t rows = static_cast<int64_t>(std::ceil(2 * half_height / pixel)) + 2;
      absl::StrAppend(&out, "    \"DetectorSpacingX\": ", Num(pixel), ", \"DetectorSpacingY\": ", Num(pixel),
                      ", \"DetectorRowCount\": ", rows, ", \"DetectorColCount\": ", cols, ",\n");
    }
    absl::StrAppend(&out, "    \"DistanceOriginSource\": ", Num(dso), ", \"DistanceOriginDetector\": ", Num(dod),
                    ",\n");
  }
  absl::StrAppend(&out, "    \"ProjectionAngles\": [",
                  absl::StrJoin(angles, ", ", [](std::string* s, double a) { s->append(Num(a)); }), "]\n  }\n}\n");
  return out;
}

}  // namespace tessera::recon::formats
