// A 3-D (or 3-D + components) image in physical space.
//
// World coordinates are NIfTI's RAS+ millimetres:
//   world = direction * diag(spacing) * index + origin
// ITK/ANTs use LPS+; convert at the boundary with ToLps()/FromLps().
#ifndef TESSERA_COMMON_VOLUME_H_
#define TESSERA_COMMON_VOLUME_H_

#include <array>
#include <string>

#include "absl/status/statusor.h"
#include "common/ndarray.h"

namespace tessera {

using Mat4 = std::array<double, 16>;  // row-major 4x4

struct Geometry {
  std::array<double, 3> spacing = {1, 1, 1};
  std::array<double, 3> origin = {0, 0, 0};
  std::array<double, 9> direction = {1, 0, 0, 0, 1, 0, 0, 0, 1};  // row-major, unit columns

  // Index (i, j, k) -> world, row-major 4x4.
  Mat4 IndexToWorld() const;
  // Decomposes an affine into spacing (column norms), unit-column direction and
  // origin. Fails on a singular or non-finite affine.
  static absl::StatusOr<Geometry> FromAffine(const Mat4& affine);
  // Three letters naming the world direction each index axis points toward,
  // e.g. "RAS" or "LPI" (the dominant component of each direction column).
  std::string AxisCodes() const;
  // The same geometry expressed in LPS+ (ITK) world coordinates, and back.
  Geometry ToLps() const;
  Geometry FromLps() const { return ToLps(); }  // the flip is its own inverse
};

struct Volume {
  NDArray data;  // shape (nx, ny, nz) or (nx, ny, nz, components)
  Geometry geometry;
  std::string description;
};

// Inverse of a 4x4 affine; INVALID_ARGUMENT when singular.
absl::StatusOr<Mat4> InvertAffine(const Mat4& m);

}  // namespace tessera

#endif  // TESSERA_COMMON_VOLUME_H_
