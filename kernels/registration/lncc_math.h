// Per-voxel LNCC algebra from the five box sums (see lncc.h for the
// definition), shared by the CPU reference and the CUDA kernels. Double
// precision throughout: the variances are differences of nearly equal sums.
#ifndef TESSERA_KERNELS_REGISTRATION_LNCC_MATH_H_
#define TESSERA_KERNELS_REGISTRATION_LNCC_MATH_H_

#include "kernels/registration/types.h"

namespace tessera {
namespace registration {

struct LnccTerms {
  double cc;  // cross^2 / (var_F var_W + eps)
  double a;   // dcc/dS_FW
  double b;   // dcc/dS_WW
  double c;   // dcc/dS_W
};

TESSERA_HD inline LnccTerms ComputeLnccTerms(double s_f, double s_w, double s_ff, double s_ww, double s_fw,
                                             double inv_n, double eps) {
  const double cross = s_fw - s_f * s_w * inv_n;
  double var_f = s_ff - s_f * s_f * inv_n;
  double var_w = s_ww - s_w * s_w * inv_n;
  // Rounding can push a variance of a flat window slightly below zero.
  var_f = var_f > 0.0 ? var_f : 0.0;
  var_w = var_w > 0.0 ? var_w : 0.0;
  const double inv_d = 1.0 / (var_f * var_w + eps);
  LnccTerms t;
  t.cc = cross * cross * inv_d;
  t.a = 2.0 * cross * inv_d;
  t.b = -t.cc * var_f * inv_d;
  t.c = -(t.a * s_f + 2.0 * t.b * s_w) * inv_n;
  return t;
}

}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_LNCC_MATH_H_
