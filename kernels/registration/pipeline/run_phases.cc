#include "kernels/registration/pipeline/run_phases.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/registration/pipeline/noise_estimate.h"

namespace tessera::registration::internal {

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

absl::Status CheckOverlap(double overlap, Init init) {
  if (overlap > 0) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the images do not overlap in physical space",
      init == Init::kCentreOfMass ? " after centre-of-mass alignment"
                                  : " (init=none: check the headers' origins or use init=com)"));
}

std::string InitLogLine(const LinearTransform& initial, double loss) {
  return absl::StrFormat("init: centre-of-mass shift (%.2f, %.2f, %.2f) mm, loss %.6g", initial.translation[0],
                         initial.translation[1], initial.translation[2], loss);
}

}  // namespace tessera::registration::internal
