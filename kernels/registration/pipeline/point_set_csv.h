// Point sets as antsApplyTransformsToPoints reads and writes them: CSV with a
// header line; columns x, y, z (found by name, case-insensitive; else the
// first three) are physical LPS millimetres; every other column (t, label,
// comment, ...) is kept as it is.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_POINT_SET_CSV_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_POINT_SET_CSV_H_

#include <array>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::registration {

struct PointSetCsv {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;  // cells as read (x, y, z rewritten by MapPointSet)
  int xyz[3] = {0, 1, 2};                      // column of x, y, z
  std::vector<std::array<double, 3>> lps;      // parsed x, y, z of each row
};

// INVALID_ARGUMENT naming `name`, the line and the column for an empty file, a
// row with a different number of cells, or a coordinate that is not a finite
// number. At most `max_points` rows (RESOURCE_EXHAUSTED beyond).
absl::StatusOr<PointSetCsv> ParsePointSetCsv(absl::string_view text, absl::string_view name,
                                             int64_t max_points = 10'000'000);

// Maps every point through `map_ras` (RAS mm -> RAS mm; the LPS conversion
// happens here) and returns the CSV with x, y, z replaced (shortest
// round-tripping decimal) and every other cell kept.
std::string MapPointSet(PointSetCsv points, const std::function<std::array<double, 3>(std::array<double, 3>)>& map_ras);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_POINT_SET_CSV_H_
