#include "kernels/registration/pipeline/space.h"

#include <cmath>

#include "common/status.h"

namespace tessera::registration {

GridSpace SpaceOf(const Volume& v) {
  GridSpace s;
  s.dims = {v.data.dim(0), v.data.dim(1), v.data.dim(2)};
  s.geometry = v.geometry;
  return s;
}

GridSpace DownsampledSpace(const GridSpace& in, const Shape& out_shape) {
  GridSpace out = in;
  for (int d = 0; d < 3; ++d) {
    const int64_t n = in.dims[d], m = out_shape[d];
    out.dims[d] = m;
    if (m > 1) {
      out.geometry.spacing[d] = in.geometry.spacing[d] * static_cast<double>(n - 1) / static_cast<double>(m - 1);
    } else if (n > 1) {
      const double shift = in.geometry.spacing[d] * (n - 1) / 2.0;
      for (int r = 0; r < 3; ++r) out.geometry.origin[r] += in.geometry.direction[r * 3 + d] * shift;
    }
  }
  return out;
}

Mat4 NormalizedToWorld(const GridSpace& grid) {
  // index = (x + 1) * (n - 1) / 2  ->  world = IndexToWorld * index.
  Mat4 to_index{};
  for (int d = 0; d < 3; ++d) {
    const double half = grid.dims[d] > 1 ? (grid.dims[d] - 1) / 2.0 : 0.0;
    to_index[d * 4 + d] = half;
    to_index[d * 4 + 3] = half;
  }
  to_index[15] = 1;
  return Multiply(grid.geometry.IndexToWorld(), to_index);
}

Mat4 Multiply(const Mat4& a, const Mat4& b) {
  Mat4 r{};
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      double s = 0;
      for (int k = 0; k < 4; ++k) s += a[i * 4 + k] * b[k * 4 + j];
      r[i * 4 + j] = s;
    }
  }
  return r;
}

Mat4 FromAffine12(const Affine12& a) {
  Mat4 m{};
  for (int i = 0; i < 12; ++i) m[i] = a[i];
  m[15] = 1;
  return m;
}

Affine12 ToAffine12(const Mat4& m) {
  Affine12 a{};
  for (int i = 0; i < 12; ++i) a[i] = m[i];
  return a;
}

Mat3 LinearPart(const Mat4& m) {
  return {m[0], m[1], m[2], m[4], m[5], m[6], m[8], m[9], m[10]};
}

absl::StatusOr<Mat3> Invert3(const Mat3& m) {
  TESSERA_ASSIGN_OR_RETURN(Mat4 inv, InvertAffine(Mat4{m[0], m[1], m[2], 0, m[3], m[4], m[5], 0, m[6], m[7], m[8],
                                                       0, 0, 0, 0, 1}));
  return LinearPart(inv);
}

absl::StatusOr<Affine12> SamplerAffineFromPhysical(const Mat4& physical, const GridSpace& fixed,
                                                   const GridSpace& moving) {
  TESSERA_ASSIGN_OR_RETURN(Mat4 moving_inv, InvertAffine(NormalizedToWorld(moving)));
  return ToAffine12(Multiply(moving_inv, Multiply(physical, NormalizedToWorld(fixed))));
}

absl::StatusOr<Mat4> PhysicalFromSamplerAffine(const Affine12& sampler, const GridSpace& fixed,
                                               const GridSpace& moving) {
  TESSERA_ASSIGN_OR_RETURN(Mat4 fixed_inv, InvertAffine(NormalizedToWorld(fixed)));
  return Multiply(NormalizedToWorld(moving), Multiply(FromAffine12(sampler), fixed_inv));
}

absl::StatusOr<Mat3> PhysicalToNormalizedDisplacement(const Mat4& physical, const GridSpace& moving) {
  TESSERA_ASSIGN_OR_RETURN(Mat4 moving_inv, InvertAffine(NormalizedToWorld(moving)));
  return LinearPart(Multiply(moving_inv, physical));
}

absl::StatusOr<Mat4> PhysicalGradientFromSampler(const Affine12& grad_sampler, const GridSpace& fixed,
                                                 const GridSpace& moving) {
  TESSERA_ASSIGN_OR_RETURN(Mat4 p, InvertAffine(NormalizedToWorld(moving)));
  const Mat4 q = NormalizedToWorld(fixed);
  Mat4 g{};
  for (int i = 0; i < 12; ++i) g[i] = grad_sampler[i];
  Mat4 pt{}, qt{};
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) {
      pt[i * 4 + j] = p[j * 4 + i];
      qt[i * 4 + j] = q[j * 4 + i];
    }
  }
  Mat4 r = Multiply(pt, Multiply(g, qt));
  for (int j = 0; j < 4; ++j) r[12 + j] = 0;
  return r;
}

Mat4 RasToLps(const Mat4& m) {
  static constexpr double kFlip[4] = {-1, -1, 1, 1};
  Mat4 r{};
  for (int i = 0; i < 4; ++i) {
    for (int j = 0; j < 4; ++j) r[i * 4 + j] = kFlip[i] * m[i * 4 + j] * kFlip[j];
  }
  return r;
}

}  // namespace tessera::registration
