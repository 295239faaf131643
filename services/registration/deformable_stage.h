// The lean greedy deformable stage (issue 13): the same algorithm as the
// registrar's standard loop (warp, metric, sampler backward, gradient
// smoothing, normalized or Adam step, compositional update, warp smoothing;
// convergence per scale), restated so the finest level holds
//
//   fixed + moving (8 B) + u (12 B) + one image-sized work buffer W (4 B)
//   + one field-sized buffer G (12 B)  = 36 B per voxel  (+ 24 B with Adam)
//
// instead of 68 B (normalized) / 92 B (Adam):
// - W holds the warped image, then the metric's dL/dW in place (LNCC writes
//   its gradient over W; MSE reads a copy of W in G); later it is the
//   smoothing scratch.
// - G holds LNCC's three coefficient volumes, then dL/du, smoothed in place.
// - no step field and no second copy of u: the step is fused with the
//   composition, in place by z-slabs (kernels/registration/lean_compose.h).
// MI keeps one more image-sized buffer for its gradient (40 B).
// The CPU backend runs the same code (host memory).
#ifndef TESSERA_SERVICES_REGISTRATION_DEFORMABLE_STAGE_H_
#define TESSERA_SERVICES_REGISTRATION_DEFORMABLE_STAGE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "services/registration/registrar.h"
#include "services/registration/space.h"

namespace tessera::registration {

// One pyramid level as the stage sees it (normalised intensities in stream memory).
struct DeformableLevel {
  int factor = 1;
  GridSpace fixed_space, moving_space;
  const NDArray* fixed = nullptr;
  const NDArray* moving = nullptr;
};

struct DeformableStageHooks {
  std::function<absl::Status()> check_cancelled;                               // every iteration
  std::function<void(int factor, int iteration, int max_iterations, double loss)> report;
};

// Runs the stage over `levels` (coarse to fine) with affine T; returns u in
// normalised sampler units on the finest level's grid. Uses options.metric,
// metric_options, deformable_iterations, deformable_lr_voxels,
// smooth_grad_sigma, smooth_warp_sigma, deformable_step, tolerance,
// patience, sampler. Appends one log line per level.
absl::StatusOr<NDArray> RunLeanDeformableStage(const Stream& stream, const RegistrationOptions& options,
                                               const DeformableStageHooks& hooks, const Mat4& t,
                                               const std::vector<DeformableLevel>& levels,
                                               std::vector<std::string>* log);

}  // namespace tessera::registration

#endif  // TESSERA_SERVICES_REGISTRATION_DEFORMABLE_STAGE_H_
