#include "kernels/registration/pipeline/registration_plan.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/registration/pipeline/deformable_stage.h"
#include "kernels/registration/pipeline/metric_mask.h"

namespace tessera::registration {
namespace {

// The checks that need only the options (the images' are Register's).
absl::Status CheckOptions(const RegistrationOptions& options) {
  if (options.scales.empty()) return absl::InvalidArgumentError("at least one scale is needed");
  for (size_t i = 0; i < options.scales.size(); ++i) {
    if (options.scales[i] < 1 || (i > 0 && options.scales[i] > options.scales[i - 1])) {
      return absl::InvalidArgumentError("scales must be >= 1 and coarse to fine, e.g. 4,2,1");
    }
  }
  if (options.stages.empty()) return absl::InvalidArgumentError("no stages requested");
  TESSERA_RETURN_IF_ERROR(CheckMasks(options));
  if (options.deformable_halve_after < 0) {
    return absl::InvalidArgumentError(absl::StrCat("deformable_halve_after must be >= 0 (0 = a fixed step), got ",
                                                   options.deformable_halve_after));
  }
  if (!(options.deformable_min_step_fraction > 0 && options.deformable_min_step_fraction <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("deformable_min_step_fraction must be in (0, 1], got ",
                                                   options.deformable_min_step_fraction));
  }
  if (!std::isfinite(options.bspline_spacing_mm) || !(options.bspline_spacing_mm > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("bspline_spacing_mm must be finite and > 0, got ", options.bspline_spacing_mm));
  }
  if (options.deformable_model == DeformableModel::kBspline && options.shards > 1) {
    return absl::InvalidArgumentError("deformable_model bspline runs unsharded: shards must be 1");
  }
  if (options.linear_samples < 0) {
    return absl::InvalidArgumentError(absl::StrCat("linear_samples must be >= 0 (0 = every voxel), got ",
                                                   options.linear_samples));
  }
  if (options.device_memory_budget_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("device_memory_budget_bytes must be >= 0 (0 = no limit), got ",
                                                   options.device_memory_budget_bytes));
  }
  return ValidateGridSamplerTuning(options.sampler);
}

}  // namespace

const char* ResidencyName(Residency residency) {
  switch (residency) {
    case Residency::kInCore: return "in core";
    case Residency::kSharded: return "sharded";
    case Residency::kOutOfCore: return "out of core";
  }
  return "?";
}

absl::StatusOr<RegistrationPlan> PlanRegistration(const RegistrationOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckOptions(options));
  RegistrationPlan plan;
  plan.options = options;
  plan.rigid = HasStage(options, Stage::kRigid);
  plan.affine = HasStage(options, Stage::kAffine);
  plan.deformable = HasStage(options, Stage::kDeformable);
  // The out-of-core stage serves the lean greedy stage only (ChooseOutOfCore).
  const bool lean_greedy =
      options.memory_mode == MemoryMode::kLean && options.deformable_model == DeformableModel::kGreedy;
  if (lean_greedy && options.force_out_of_core) {
    plan.residency = Residency::kOutOfCore;
  } else if (options.shards > 1 || options.process_group != nullptr) {
    plan.residency = Residency::kSharded;
  }
  plan.precision = LeanStageUsesMixedPrecision(options) ? Precision::kMixed : Precision::kFull;
  return plan;
}

}  // namespace tessera::registration
