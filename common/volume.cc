#include "common/volume.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera {

Mat4 Geometry::IndexToWorld() const {
  Mat4 m{};
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 3; ++c) m[r * 4 + c] = direction[r * 3 + c] * spacing[c];
    m[r * 4 + 3] = origin[r];
  }
  m[15] = 1;
  return m;
}

absl::StatusOr<Geometry> Geometry::FromAffine(const Mat4& affine) {
  Geometry g;
  for (double v : affine) {
    if (!std::isfinite(v)) return absl::InvalidArgumentError("affine has non-finite entries");
  }
  for (int c = 0; c < 3; ++c) {
    double norm = std::sqrt(affine[c] * affine[c] + affine[4 + c] * affine[4 + c] + affine[8 + c] * affine[8 + c]);
    if (norm <= 0) return absl::InvalidArgumentError(absl::StrCat("affine column ", c, " is zero (singular)"));
    g.spacing[c] = norm;
    for (int r = 0; r < 3; ++r) g.direction[r * 3 + c] = affine[r * 4 + c] / norm;
  }
  for (int r = 0; r < 3; ++r) g.origin[r] = affine[r * 4 + 3];
  const auto& d = g.direction;
  double det = d[0] * (d[4] * d[8] - d[5] * d[7]) - d[1] * (d[3] * d[8] - d[5] * d[6]) +
               d[2] * (d[3] * d[7] - d[4] * d[6]);
  if (std::abs(det) < 1e-6) return absl::InvalidArgumentError("affine is singular (collinear axes)");
  return g;
}

std::string Geometry::AxisCodes() const {
  static const char kPositive[] = {'R', 'A', 'S'};
  static const char kNegative[] = {'L', 'P', 'I'};
  std::string codes;
  for (int c = 0; c < 3; ++c) {
    int best = 0;
    for (int r = 1; r < 3; ++r) {
      if (std::abs(direction[r * 3 + c]) > std::abs(direction[best * 3 + c])) best = r;
    }
    codes += direction[best * 3 + c] >= 0 ? kPositive[best] : kNegative[best];
  }
  return codes;
}

Geometry Geometry::ToLps() const {
  Geometry g = *this;
  for (int r = 0; r < 2; ++r) {  // x and y flip sign between RAS and LPS
    g.origin[r] = -origin[r];
    for (int c = 0; c < 3; ++c) g.direction[r * 3 + c] = -direction[r * 3 + c];
  }
  return g;
}

absl::StatusOr<Mat4> InvertAffine(const Mat4& m) {
  // Affine: invert the 3x3 block by cofactors, then the translation.
  const double a = m[0], b = m[1], c = m[2], d = m[4], e = m[5], f = m[6], g = m[8], h = m[9], i = m[10];
  const double det = a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g);
  if (!(std::abs(det) > 1e-12)) return absl::InvalidArgumentError("affine is singular");
  Mat4 r{};
  r[0] = (e * i - f * h) / det;
  r[1] = (c * h - b * i) / det;
  r[2] = (b * f - c * e) / det;
  r[4] = (f * g - d * i) / det;
  r[5] = (a * i - c * g) / det;
  r[6] = (c * d - a * f) / det;
  r[8] = (d * h - e * g) / det;
  r[9] = (b * g - a * h) / det;
  r[10] = (a * e - b * d) / det;
  for (int row = 0; row < 3; ++row) {
    r[row * 4 + 3] = -(r[row * 4] * m[3] + r[row * 4 + 1] * m[7] + r[row * 4 + 2] * m[11]);
  }
  r[15] = 1;
  return r;
}

}  // namespace tessera
