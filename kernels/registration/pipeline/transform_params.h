// Parameterizations of the physical transforms that the rigid and affine
// stages optimise, T(x) = M (x - c) + c + t in RAS mm, and the chain rule from
// dL/dT to the parameters.
//   rigid:  M = R(omega) M0 (omega: axis-angle, radians), t = t0 + s_t tau
//   affine: M = M0 + s_m delta (9 entries),                t = t0 + s_t tau
// M0, t0 and the centre c come from the previous stage (or the centre-of-mass
// initialisation). The scales s_t (mm per unit) and s_m make one Adam step of
// size lr mean lr * s_t millimetres and lr * s_m of matrix entry.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_TRANSFORM_PARAMS_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_TRANSFORM_PARAMS_H_

#include <array>
#include <vector>

#include "kernels/registration/pipeline/space.h"

namespace tessera::registration {

struct LinearTransform {
  Mat3 matrix = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  std::array<double, 3> translation = {0, 0, 0};
  std::array<double, 3> center = {0, 0, 0};
  Mat4 ToMat4() const;  // [M | c + t - M c]
};

enum class TransformModel { kRigid, kAffine };

class TransformParameterization {
 public:
  TransformParameterization(TransformModel model, LinearTransform base, double translation_scale,
                            double matrix_scale);
  int size() const { return model_ == TransformModel::kRigid ? 6 : 12; }
  LinearTransform Apply(const std::vector<double>& params) const;
  // dL/dparams given dL/dT (rows 0..2 of a 4x4) at `params`.
  std::vector<double> Gradient(const std::vector<double>& params, const Mat4& grad_transform) const;

 private:
  TransformModel model_;
  LinearTransform base_;
  double translation_scale_;
  double matrix_scale_;
};

// Rotation matrix of an axis-angle vector (Rodrigues).
Mat3 RotationFromAxisAngle(const std::array<double, 3>& omega);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_TRANSFORM_PARAMS_H_
