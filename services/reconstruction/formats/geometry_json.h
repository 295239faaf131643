// Reconstruction geometry as JSON, in ASTRA's own dictionaries, so that users
// coming from ASTRA (or TIGRE via ASTRA's conventions) can save
// `{"vol_geom": astra.create_vol_geom(...), "proj_geom": astra.create_proj_geom(...)}`
// with json.dump and hand it to us unchanged:
//
//   {"vol_geom": {"GridColCount": 256, "GridRowCount": 256, "GridSliceCount": 1,
//                 "Option": {"WindowMinX": -128, "WindowMaxX": 128, ...}},
//    "proj_geom": {"type": "fanflat", "DetectorWidth": 1.0, "DetectorCount": 384,
//                  "ProjectionAngles": [0.0, 0.0087, ...],
//                  "DistanceOriginSource": 600, "DistanceOriginDetector": 400}}
//
// vol_geom: GridColCount (x), GridRowCount (y), GridSliceCount (z; optional,
//   default 1). Window{Min,Max}{X,Y,Z} under "Option" (ASTRA's C++/XML spelling),
//   "option" (what astra.create_vol_geom builds in Python and MATLAB) or directly
//   in vol_geom; each pair is optional and defaults to ASTRA's 1 mm voxels
//   centred on the origin (recon::CenteredVolume).
// proj_geom.type:
//   parallel     DetectorWidth, DetectorCount, ProjectionAngles
//   fanflat      + DistanceOriginSource, DistanceOriginDetector
//   cone         DetectorSpacingX, DetectorSpacingY, DetectorRowCount, DetectorColCount,
//                ProjectionAngles, DistanceOriginSource, DistanceOriginDetector
//   parallel_vec DetectorCount, Vectors (rows of 6: rayX rayY dX dY uX uY)
//   fanflat_vec  DetectorCount, Vectors (rows of 6: srcX srcY dX dY uX uY)
//   cone_vec     DetectorRowCount, DetectorColCount,
//                Vectors (rows of 12: srcX srcY srcZ dX dY dZ uX uY uZ vX vY vZ)
// Angle-based forms are converted with ASTRA's formulas (kernels/reconstruction/geometry.h).
//
// Our extension: "ProjectionAngles" may also be {"start": 0, "stop": 6.283185, "count": 720},
// `count` angles evenly spaced from start with stop excluded (start + (stop - start) i / count).
//
// Every problem is INVALID_ARGUMENT naming the field path, e.g.
// "proj_geom.DistanceOriginSource: missing", "proj_geom.Vectors row 7: expected 12 numbers, got 11",
// "vol_geom.GridColCount: must be a positive integer, got -3", and JSON syntax
// errors give line and column. Unknown keys are ignored (ASTRA dictionaries
// carry some we do not use). The result has passed recon::Validate.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_FORMATS_GEOMETRY_JSON_H_
#define TESSERA_SERVICES_RECONSTRUCTION_FORMATS_GEOMETRY_JSON_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/reconstruction/geometry.h"

namespace tessera::recon::formats {

// Largest geometry file ReadGeometryJson accepts (a cone_vec file with a
// million views is ~300 MB of text; anything near this limit is a mistake).
constexpr int64_t kMaxGeometryJsonBytes = int64_t{64} << 20;

absl::StatusOr<CtGeometry> ParseGeometryJson(absl::string_view json);

// NOT_FOUND for a missing file; other errors start with the path.
absl::StatusOr<CtGeometry> ReadGeometryJson(const std::string& path);

// The vector form (parallel_vec, fanflat_vec or cone_vec) with the volume's
// window under "option" (a default 2-D slab without GridSliceCount and z
// window, as ASTRA's 2-D vol_geom), numbers written so that they parse back exactly:
// ParseGeometryJson(WriteGeometryJson(g)) reproduces g for any valid g.
std::string WriteGeometryJson(const CtGeometry& geometry);

// Writes WriteGeometryJson(geometry) to `path` (through a temporary file renamed into place).
absl::Status WriteGeometryJsonFile(const CtGeometry& geometry, const std::string& path);

}  // namespace tessera::recon::formats

#endif  // TESSERA_SERVICES_RECONSTRUCTION_FORMATS_GEOMETRY_JSON_H_
