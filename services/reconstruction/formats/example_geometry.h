// Ready-made ASTRA geometry JSON for trying the reconstruction service and for
// tests (`tessera phantom geometry`): an N x N (cone: N x N x N) volume of
// 1 mm voxels centred on the origin, seen whole by every view.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_FORMATS_EXAMPLE_GEOMETRY_H_
#define TESSERA_SERVICES_RECONSTRUCTION_FORMATS_EXAMPLE_GEOMETRY_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tessera::recon::formats {

// type: "parallel" (views over [0, pi), 1 mm detector pixels), "fanflat" or
// "cone" (views over [0, 2 pi), source at 2N mm and detector at N mm from the
// origin, 1.5 mm pixels: about 1 mm at the centre). views <= 0 picks the
// usual count (pi/2 N for parallel, pi N for full fan/cone scans). The JSON is
// ASTRA's angle form with an explicit ProjectionAngles array, so ASTRA reads
// it too. INVALID_ARGUMENT for another type, size outside [4, 4096] or more
// than 100000 views.
absl::StatusOr<std::string> ExampleGeometryJson(absl::string_view type, int64_t size, int64_t views = 0);

}  // namespace tessera::recon::formats

#endif  // TESSERA_SERVICES_RECONSTRUCTION_FORMATS_EXAMPLE_GEOMETRY_H_
