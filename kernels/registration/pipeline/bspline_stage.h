// The B-spline (free-form deformation) deformable stage, issue 17: the
// displacement is a cubic B-spline of a control grid c whose spacing is
// given in mm (kernels/registration/bspline_field.h), u = B c, instead of
// the greedy stage's free dense field. Each iteration reuses the dense
// machinery for the metric and dL/du (warp, metric gradient, sampler
// backward), then dL/dc = B^T dL/du and a step on c (the normalized rule or
// Adam, options.deformable_step; the step control of step_control.h). The
// model is additive (u = B c, as elastix's B-spline transform), not
// compositional, and the grid itself is the regularisation: no Gaussian
// smoothing of gradient or field.
//
// Coarse to fine: with L levels the grid spacing at level l is
// bspline_spacing_mm * 2^(L - 1 - l) (elastix's GridSpacingSchedule ...,4,2,1),
// and c moves to the next level by exact B-spline subdivision. Control 1 sits
// on voxel 0 at every level (aligned corners), so the grids nest.
//
// Memory at the finest level: fixed + moving (8 B per voxel) + warped image
// and its gradient (8 B) + u and dL/du (24 B) = 40 B per voxel, plus the
// control grid and the separable passes' scratch (about 12 B per voxel
// divided by the control spacing in voxels).
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_BSPLINE_STAGE_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_BSPLINE_STAGE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/registration/bspline_field.h"
#include "kernels/registration/pipeline/deformable_stage.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/space.h"

namespace tessera::registration {

// The control grid of a level: spacing_mm along each axis of `space`
// (INVALID_ARGUMENT naming bspline_spacing_mm when it is not finite and > 0).
absl::StatusOr<BsplineGrid> BsplineGridFor(const GridSpace& space, double spacing_mm);

// The same contract as RunLeanDeformableStage: runs over `levels` (coarse to
// fine) with affine T and returns u in normalised sampler units on the
// finest level's grid. Uses options.metric, metric_options,
// deformable_iterations, deformable_lr_voxels (the largest control step per
// iteration, voxels of the level, for the normalized rule; Adam's lr),
// deformable_step, deformable_halve_after, deformable_min_step_fraction,
// bspline_spacing_mm, tolerance, patience, sampler. One log line per level.
absl::StatusOr<NDArray> RunBsplineStage(const Stream& stream, const RegistrationOptions& options,
                                        const DeformableStageHooks& hooks, const Mat4& t,
                                        const std::vector<DeformableLevel>& levels, std::vector<std::string>* log);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_BSPLINE_STAGE_H_
