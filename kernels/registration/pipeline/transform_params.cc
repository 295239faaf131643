#include "kernels/registration/pipeline/transform_params.h"

#include <cmath>

namespace tessera::registration {
namespace {

Mat3 MatMul3(const Mat3& a, const Mat3& b) {
  Mat3 r{};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 3; ++k) r[i * 3 + j] += a[i * 3 + k] * b[k * 3 + j];
    }
  }
  return r;
}

// dL/dM and dL/dt of T = [M | c + t - M c] from dL/dT.
void LinearGradients(const Mat4& g, const std::array<double, 3>& c, Mat3* grad_m, std::array<double, 3>* grad_t) {
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) (*grad_m)[i * 3 + j] = g[i * 4 + j] - g[i * 4 + 3] * c[j];
    (*grad_t)[i] = g[i * 4 + 3];
  }
}

}  // namespace

Mat4 LinearTransform::ToMat4() const {
  Mat4 m{};
  for (int i = 0; i < 3; ++i) {
    double mc = 0;
    for (int j = 0; j < 3; ++j) {
      m[i * 4 + j] = matrix[i * 3 + j];
      mc += matrix[i * 3 + j] * center[j];
    }
    m[i * 4 + 3] = center[i] + translation[i] - mc;
  }
  m[15] = 1;
  return m;
}

Mat3 RotationFromAxisAngle(const std::array<double, 3>& w) {
  const double theta = std::sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]);
  const Mat3 k_raw = {0, -w[2], w[1], w[2], 0, -w[0], -w[1], w[0], 0};
  Mat3 r = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  if (theta < 1e-12) {
    for (int i = 0; i < 9; ++i) r[i] += k_raw[i];
    return r;
  }
  Mat3 k{};
  for (int i = 0; i < 9; ++i) k[i] = k_raw[i] / theta;
  const Mat3 k2 = MatMul3(k, k);
  for (int i = 0; i < 9; ++i) r[i] += std::sin(theta) * k[i] + (1 - std::cos(theta)) * k2[i];
  return r;
}

TransformParameterization::TransformParameterization(TransformModel model, LinearTransform base,
                                                     double translation_scale, double matrix_scale)
    : model_(model), base_(base), translation_scale_(translation_scale), matrix_scale_(matrix_scale) {}

LinearTransform TransformParameterization::Apply(const std::vector<double>& p) const {
  LinearTransform t = base_;
  const int tau = model_ == TransformModel::kRigid ? 3 : 9;
  for (int i = 0; i < 3; ++i) t.translation[i] += translation_scale_ * p[tau + i];
  if (model_ == TransformModel::kRigid) {
    t.matrix = MatMul3(RotationFromAxisAngle({p[0], p[1], p[2]}), base_.matrix);
  } else {
    for (int i = 0; i < 9; ++i) t.matrix[i] += matrix_scale_ * p[i];
  }
  return t;
}

std::vector<double> TransformParameterization::Gradient(const std::vector<double>& p, const Mat4& g) const {
  Mat3 grad_m{};
  std::array<double, 3> grad_t{};
  LinearGradients(g, base_.center, &grad_m, &grad_t);
  std::vector<double> out(size());
  const int tau = model_ == TransformModel::kRigid ? 3 : 9;
  for (int i = 0; i < 3; ++i) out[tau + i] = grad_t[i] * translation_scale_;
  if (model_ == TransformModel::kAffine) {
    for (int i = 0; i < 9; ++i) out[i] = grad_m[i] * matrix_scale_;
    return out;
  }
  // dR/domega by central differences of Rodrigues' formula: 3x3 matrices only,
  // exact to ~1e-10, and free of the small-angle special cases.
  constexpr double h = 1e-6;
  for (int k = 0; k < 3; ++k) {
    std::array<double, 3> plus = {p[0], p[1], p[2]}, minus = plus;
    plus[k] += h;
    minus[k] -= h;
    const Mat3 rp = MatMul3(RotationFromAxisAngle(plus), base_.matrix);
    const Mat3 rm = MatMul3(RotationFromAxisAngle(minus), base_.matrix);
    double s = 0;
    for (int i = 0; i < 9; ++i) s += grad_m[i] * (rp[i] - rm[i]) / (2 * h);
    out[k] = s;
  }
  return out;
}

}  // namespace tessera::registration
