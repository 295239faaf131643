// Thin-plate spline (Bookstein 1989) and rigid least-squares fits between
// 2-D point sets, for the DMC final stage (dmc_final_stage.h).
//
// TPS through control points c_i -> v_i (i < n):
//   f(p) = a_0 + A p + sum_i w_i U(|p - c_i|),  U(r) = r^2 log r^2 (U(0) = 0)
// with sum_i w_i = 0 and sum_i w_i c_i = 0, solving for each output
// coordinate the (n + 3) x (n + 3) system
//   [ K + lambda_eff I   P ] [w]   [v]          K_ij = U(|c_i - c_j|)
//   [ P^T                0 ] [a] = [0],         P_i  = (1, x_i, y_i)
// by LU with partial pivoting (double precision). lambda = 0 interpolates
// exactly; lambda > 0 smooths (lambda_eff = lambda * mean |K_ij| over i != j,
// so lambda is independent of the pixel scale). Affine maps are reproduced
// exactly for any lambda (w = 0).
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_TPS_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_TPS_H_

#include <vector>

#include "absl/status/statusor.h"

namespace tessera {
namespace fingerprint {

struct Point2 {
  double x = 0;
  double y = 0;
};

class ThinPlateSpline {
 public:
  // INVALID_ARGUMENT: fewer than 3 points, sizes differ, non-finite values,
  // lambda < 0. FAILED_PRECONDITION: a singular system (e.g. all control
  // points collinear, or repeated with lambda = 0).
  static absl::StatusOr<ThinPlateSpline> Fit(const std::vector<Point2>& from, const std::vector<Point2>& to,
                                             double lambda = 0.0);

  Point2 Apply(const Point2& p) const;
  // d f / d p at p: j[r][c] = d f_r / d p_c.
  void Jacobian(const Point2& p, double j[2][2]) const;
  // Both at once (one logarithm per control point).
  Point2 ApplyWithJacobian(const Point2& p, double j[2][2]) const;
  // Bending energy trace(w^T K w) (0 for an affine map).
  double BendingEnergy() const;

 private:
  std::vector<Point2> centres_;
  std::vector<double> wx_, wy_;  // kernel weights per output coordinate
  double ax_[3] = {0, 0, 0}, ay_[3] = {0, 0, 0};  // a_0, a_x, a_y per output coordinate
};

// The rotation + translation q = R(a) p + t minimising sum |q_i - to_i|^2
// (2-D Procrustes without scale). Rotation in the image frame of
// template.h: R(a) (dx, dy) = (dx cos a + dy sin a, -dx sin a + dy cos a), so
// a minutia direction theta becomes theta + a.
struct RigidTransform {
  double angle = 0;  // a
  double tx = 0, ty = 0;
  Point2 Apply(const Point2& p) const;
};
// INVALID_ARGUMENT for no points or sizes that differ.
absl::StatusOr<RigidTransform> FitRigid(const std::vector<Point2>& from, const std::vector<Point2>& to);

// Solves the dense n x n system M x = b in place (row-major M, one or more
// right-hand sides as columns of b, n x k row-major) by LU with partial
// pivoting. FAILED_PRECONDITION when a pivot is below `tiny` times the largest
// |M_ij|.
absl::Status SolveDense(std::vector<double>& m, int n, std::vector<double>& b, int k, double tiny = 1e-12);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_TPS_H_
