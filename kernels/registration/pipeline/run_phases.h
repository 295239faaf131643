// The phases of one registration that depend on where its arrays live
// (RegistrationPlan::residency): in core (the pyramid in the stream's
// memory, in_core_run.cc) or within a device budget (out_of_core_run.cc).
// Register (registrar.cc) is the one driver: it resolves the device and the
// residency, then runs SetUp, the linear stages, the deformable stage and
// Output of whichever it chose. Internal to the registrar library.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_RUN_PHASES_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_RUN_PHASES_H_

#include <atomic>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/device.h"
#include "common/volume.h"
#include "kernels/registration/pipeline/out_of_core_stage.h"
#include "kernels/registration/pipeline/registrar.h"
#include "kernels/registration/pipeline/registration_plan.h"
#include "kernels/registration/pipeline/transform_params.h"

namespace tessera::registration::internal {

// The host half of an in-core run's set-up: both images normalised
// (NormalizedIntensitiesParallel), the fixed image's centre of mass, the
// moving one's when the initialisation needs it, and the noise estimates when
// the field smoothing needs them (WarpSigmaNeedsNoise). Register computes it
// while the GPU's context starts (issue 37: each takes a fifth of a second on
// a 1 mm pair); the in-core SetUp computes it itself otherwise.
struct HostPrepared {
  NDArray fixed_norm, moving_norm;
  std::array<double, 3> fixed_com{}, moving_com{};
  double fixed_noise = 0, moving_noise = 0;
};
absl::StatusOr<HostPrepared> PrepareHostInputs(const Volume& fixed, const Volume& moving,
                                               const RegistrationOptions& options);
// Whether Register may prepare the host half before it knows the residency:
// true when the run will be in core unless the GPU's free memory says
// otherwise, and the pair is small enough (<= 2^28 voxels together) that a
// wasted preparation would cost little.
bool PrepareHostInputsEarly(const RegistrationOptions& options, Dims3 fixed, Dims3 moving);

// What a run reads: the caller's images, its plan and where it runs.
struct RunInputs {
  const Volume& fixed;
  const Volume& moving;
  const RegistrationPlan& plan;
  const Stream& stream;
  const ProgressCallback& progress;
  const std::atomic<bool>* cancel;
  absl::Time deadline;
  HostPrepared* prepared = nullptr;  // in core: consumed by SetUp when given
};

class RunPhases {
 public:
  virtual ~RunPhases() = default;
  // Normalised images, centres of mass, the pyramid, the metric, the initial
  // transform (checked for overlap) and its loss; the field smoothing sigma
  // resolved. Log lines go to result->log, the "init" line among them.
  virtual absl::StatusOr<LinearTransform> SetUp(RegistrationResult* result) = 0;
  // One linear stage (rigid or affine) over every level, coarse to fine.
  virtual absl::StatusOr<LinearTransform> RunLinearStage(TransformModel model, const char* stage,
                                                         const LinearTransform& current,
                                                         const std::vector<int>& iterations,
                                                         std::vector<std::string>* log) = 0;
  // The deformable stage after affine_ras: its displacement at full
  // resolution, normalised sampler units on the fixed grid.
  virtual absl::StatusOr<NDArray> RunDeformableStage(const Mat4& affine_ras, std::vector<std::string>* log) = 0;
  // The final loss, the warped original intensities and, with a
  // displacement `u` (empty without a deformable stage), the Jacobian summary
  // and displacement_ras.
  virtual absl::Status Output(NDArray u, RegistrationResult* result) = 0;
  virtual void Report(const std::string& stage, int scale, int iteration, int max_iterations, double loss) = 0;
};

std::unique_ptr<RunPhases> InCorePhases(const RunInputs& in);
// `choice`: ChooseOutOfCore's, with shards > 0.
std::unique_ptr<RunPhases> OutOfCorePhases(const RunInputs& in, const OutOfCoreChoice& choice);

// ---------------------------------------------------------------- shared by both

// True when a run's field smoothing comes from the images' noise
// (RegistrationOptions::smooth_warp_sigma < 0 with MI and the greedy
// deformable stage): only then are the noise estimates computed.
bool WarpSigmaNeedsNoise(const RegistrationOptions& options);
// RegistrationOptions::smooth_warp_sigma of a run: the caller's when >= 0;
// with WarpSigmaNeedsNoise, from the noise sigma of the noisier normalised
// image (noise_estimate.h; the noise arguments are read only then), with a
// log line saying so; else kFixedWarpSigma.
double ResolveWarpSigma(const RegistrationOptions& options, double fixed_noise, double moving_noise,
                        std::vector<std::string>* log);
// FAILED_PRECONDITION unless `overlap` > 0 (the initial transform's).
absl::Status CheckOverlap(double overlap, const RegistrationOptions& options);
// RegistrationOptions::initial_transform `t` as a LinearTransform centred
// on `center` (its ToMat4() is t).
LinearTransform GivenInitialTransform(const Mat4& t, const std::array<double, 3>& center);
// "init: centre-of-mass shift (x, y, z) mm, loss L" (init com or none), or
// "init: given transform (translation ... mm, ...), loss L".
std::string InitLogLine(const RegistrationOptions& options, const LinearTransform& initial, double loss);

}  // namespace tessera::registration::internal

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_RUN_PHASES_H_
