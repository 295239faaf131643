#include "kernels/registration/pipeline/run_phases.h"

#include <algorithm>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "kernels/registration/pipeline/host_setup.h"
#include "kernels/registration/pipeline/noise_estimate.h"

namespace tessera::registration::internal {

absl::StatusOr<HostPrepared> PrepareHostInputs(const Volume& fixed, const Volume& moving,
                                               const RegistrationOptions& options) {
  HostPrepared p;
  const bool noise = WarpSigmaNeedsNoise(options);
  const bool moving_com = !options.initial_transform && options.init == Init::kCentreOfMass;
  // The two images on two threads: each pass is parallel already, but the
  // percentile and noise medians are not (a 1 mm pair: 0.26 s -> the larger half).
  absl::Status moving_status;
  std::thread moving_thread([&] {
    absl::StatusOr<NDArray> norm = NormalizedIntensitiesParallel(moving, "moving");
    if (!norm.ok()) {
      moving_status = norm.status();
      return;
    }
    p.moving_norm = *std::move(norm);
    if (noise) p.moving_noise = EstimateNoiseSigma(p.moving_norm);
    if (moving_com) p.moving_com = CentreOfMassParallel(p.moving_norm, moving.geometry);
  });
  absl::StatusOr<NDArray> fixed_norm = NormalizedIntensitiesParallel(fixed, "fixed");
  if (fixed_norm.ok()) {
    p.fixed_norm = *std::move(fixed_norm);
    if (noise) p.fixed_noise = EstimateNoiseSigma(p.fixed_norm);
    p.fixed_com = CentreOfMassParallel(p.fixed_norm, fixed.geometry);
  }
  moving_thread.join();
  TESSERA_RETURN_IF_ERROR(fixed_norm.status());  // the fixed image's error first, as before
  TESSERA_RETURN_IF_ERROR(moving_status);
  return p;
}

bool PrepareHostInputsEarly(const RegistrationOptions& options, Dims3 fixed, Dims3 moving) {
  if (options.force_out_of_core || fixed.size() + moving.size() > (int64_t{1} << 28)) return false;
  return options.device_memory_budget_bytes <= 0 ||
         LeanStageDeviceBytes(options, fixed, Backend::kCuda) <= options.device_memory_budget_bytes;
}

bool WarpSigmaNeedsNoise(const RegistrationOptions& options) {
  return options.smooth_warp_sigma < 0 && options.metric == Metric::kMi && HasStage(options, Stage::kDeformable) &&
         options.deformable_model != DeformableModel::kBspline;
}

double ResolveWarpSigma(const RegistrationOptions& options, double fixed_noise, double moving_noise,
                        std::vector<std::string>* log) {
  constexpr double kFixedWarpSigma = 0.5;
  if (!WarpSigmaNeedsNoise(options)) {
    return options.smooth_warp_sigma >= 0 ? options.smooth_warp_sigma : kFixedWarpSigma;
  }
  const double sigma = AutoWarpSigma(std::max(fixed_noise, moving_noise));
  log->push_back(absl::StrFormat(
      "deformable: field smoothing sigma %.3g voxels per iteration (auto: image noise sigma %.4f fixed, %.4f moving, "
      "of the normalised range)",
      sigma, fixed_noise, moving_noise));
  return sigma;
}

absl::Status CheckOverlap(double overlap, const RegistrationOptions& options) {
  if (overlap > 0) return absl::OkStatus();
  if (options.initial_transform) {
    return absl::FailedPreconditionError(
        "the images do not overlap in physical space under the given initial transform (check its direction: "
        "fixed -> moving points, as ANTs writes 0GenericAffine.mat)");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "the images do not overlap in physical space",
      options.init == Init::kCentreOfMass ? " after centre-of-mass alignment"
                                          : " (init=none: check the headers' origins or use init=com)"));
}

LinearTransform GivenInitialTransform(const Mat4& t, const std::array<double, 3>& center) {
  // ToMat4 = [M | c + tr - M c], so tr = b - c + M c.
  LinearTransform initial;
  initial.center = center;
  for (int r = 0; r < 3; ++r) {
    double mc = 0;
    for (int c = 0; c < 3; ++c) {
      initial.matrix[3 * r + c] = t[4 * r + c];
      mc += t[4 * r + c] * center[c];
    }
    initial.translation[r] = t[4 * r + 3] - center[r] + mc;
  }
  return initial;
}

std::string InitLogLine(const RegistrationOptions& options, const LinearTransform& initial, double loss) {
  if (options.initial_transform) {
    const Mat4& t = *options.initial_transform;
    return absl::StrFormat(
        "init: given transform (matrix [%.4f %.4f %.4f; %.4f %.4f %.4f; %.4f %.4f %.4f], offset (%.2f, %.2f, %.2f) "
        "mm), loss %.6g",
        t[0], t[1], t[2], t[4], t[5], t[6], t[8], t[9], t[10], t[3], t[7], t[11], loss);
  }
  return absl::StrFormat("init: %s shift (%.2f, %.2f, %.2f) mm, loss %.6g",
                         options.init == Init::kCentreOfMass ? "centre-of-mass" : "no", initial.translation[0],
                         initial.translation[1], initial.translation[2], loss);
}

}  // namespace tessera::registration::internal
