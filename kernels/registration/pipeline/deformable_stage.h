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
//
// Precision (RegistrationOptions::precision, lncc):
//   "full":  the above, 36 B per voxel.
//   "mixed": fixed + moving stored in fp16 (4 B) and G in bf16 (6 B):
//            4 + 12 + 4 + 6 = 26 B per voxel (+ 24 B with Adam); the
//            registrar converts the pyramid before the stage and frees the
//            float levels (registrar.cc), so the whole run stays below 30 B
//            per voxel. Every kernel loads 16-bit values into float and
//            computes in float/double (storage16.h explains fp16 for the
//            images, bf16 for G). u and W stay float.
//   MSE and MI run in full precision: MI's kernels take float arrays; MSE's
//   gradient 2 (W - F) / N is a small difference of fp16-rounded images
//   (measured on Colin27: Dice 0.800 full vs 0.814 mixed, displacement 15%
//   RMS apart, outside the 0.005 Dice budget; MseHalfFixed is kept and tested).
// The log line of each level reports the bytes per voxel the stage holds.
// The CPU backend runs the same code (host memory), except that its LNCC
// keeps five float volumes between iterations (+20 B per voxel, issue 38:
// LeanMetricCpuScratchBytes; the CUDA kernel needs none).
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_DEFORMABLE_STAGE_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_DEFORMABLE_STAGE_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/device.h"
#include "common/ndarray.h"
#include "kernels/registration/pipeline/plateau_stop.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/space.h"
#include "kernels/registration/pipeline/step_control.h"
#include "kernels/registration/types.h"

namespace tessera::registration {

// One pyramid level as the stage sees it (normalised intensities in stream memory).
struct DeformableLevel {
  int factor = 1;
  GridSpace fixed_space, moving_space;
  const NDArray* fixed = nullptr;
  const NDArray* moving = nullptr;
  // Mixed precision: the same images as fp16 (DType::kUInt16 arrays holding
  // Half, storage16.h) instead of fixed / moving (then null).
  const NDArray* fixed_half = nullptr;
  const NDArray* moving_half = nullptr;
};

// Bytes the stage's metric keeps between iterations on `backend` beyond the
// per-voxel model above, for a level of `dims`: the CPU LNCC's volumes (its
// LnccWorkspace's host half, cpu::LnccScratch::Bytes), else 0.
// LeanStageDeviceBytes counts them.
int64_t LeanMetricCpuScratchBytes(const RegistrationOptions& options, Backend backend, Dims3 dims);

// True when `options` run the lean stage in mixed precision (precision
// "mixed", metric lncc, unsharded lean mode): the registrar then hands
// it fp16 levels.
bool LeanStageUsesMixedPrecision(const RegistrationOptions& options);

// True when the deformable stage jitters its sampling grid (metric mi and
// MetricOptions::mi_grid_jitter; grid_jitter.h). The greedy lean and
// standard loops and the B-spline stage follow it; sharded and out-of-core
// stages do not.
bool DeformableStageJitters(const RegistrationOptions& options);

// ", jittered grid", ", jittered voxels" or "": what a stage's log line
// says about its sampling grid.
const char* JitterLogTag(const RegistrationOptions& options, bool jitter);

// The deformable stage's stopping and step rules for `options`; a jittered
// stage's loss is noisy, so they then wait at least kJitteredPatience and
// kJitteredHalveAfter iterations (grid_jitter.h). The greedy loops and the
// B-spline stage all take them from here.
// finest: the level is the stage's last (the window rate rule skips it unless
// options.plateau_window_finest; the remaining-gain rule, with
// options.finest_remaining_gain, runs there only); budget: the level's
// iteration budget.
PlateauStop DeformablePlateauStop(const RegistrationOptions& options, bool jitter, bool finest, int budget);
StepControl DeformableStepControl(const RegistrationOptions& options, bool jitter);

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

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_DEFORMABLE_STAGE_H_
