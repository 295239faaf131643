#include "services/registration/request_options.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/device.h"
#include "common/status.h"
#include "kernels/registration/mutual_info.h"

namespace tessera::registration {
namespace {

// Iteration counts beyond this are surely mistakes.
constexpr int kMaxIterations = 100000;
constexpr int kMaxScale = 64;
// More samples than this per iteration is no longer sampling (1024^3 voxels).
constexpr int64_t kMaxLinearSamples = int64_t{1} << 30;
constexpr int kMaxShards = 64;
// A control spacing beyond a metre is no longer a deformation model.
constexpr double kMaxBsplineSpacingMm = 1000;

}  // namespace

absl::StatusOr<RegistrationOptions> ParseRegistrationOptions(const v1::RegistrationOptions& proto,
                                                             const std::string& default_device) {
  RegistrationOptions o;
  if (!proto.metric().empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.metric, ParseOption<Metric>(proto.metric(), "options.metric"));
  }
  if (proto.stages_size() > 0) {
    TESSERA_ASSIGN_OR_RETURN(
        o.stages, ParseOptions<Stage>(std::vector<std::string>(proto.stages().begin(), proto.stages().end()),
                                      "options.stages: stage"));
  }
  if (proto.scales_size() > 0) {
    o.scales.assign(proto.scales().begin(), proto.scales().end());
    for (size_t i = 0; i < o.scales.size(); ++i) {
      if (o.scales[i] < 1 || o.scales[i] > kMaxScale || (i > 0 && o.scales[i] > o.scales[i - 1])) {
        return absl::InvalidArgumentError(absl::StrCat("options.scales [", absl::StrJoin(o.scales, ", "),
                                                       "] must be in 1..", kMaxScale,
                                                       " and coarse to fine, e.g. 4, 2, 1"));
      }
    }
  }
  for (auto [field, name, target] :
       {std::tuple<const google::protobuf::RepeatedField<int32_t>*, const char*, std::vector<int>*>{
            &proto.rigid_iterations(), "rigid_iterations", &o.rigid_iterations},
        {&proto.affine_iterations(), "affine_iterations", &o.affine_iterations},
        {&proto.deformable_iterations(), "deformable_iterations", &o.deformable_iterations}}) {
    if (field->empty()) continue;
    target->assign(field->begin(), field->end());
    for (int n : *target) {
      if (n < 0 || n > kMaxIterations) {
        return absl::InvalidArgumentError(
            absl::StrCat("options.", name, " has ", n, "; iteration counts must be in 0..", kMaxIterations));
      }
    }
  }
  if (proto.lncc_window() != 0) {
    if (proto.lncc_window() < 1 || proto.lncc_window() % 2 == 0 || proto.lncc_window() > 51) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.lncc_window ", proto.lncc_window(), " must be odd, in 1..51"));
    }
    o.metric_options.lncc_window = proto.lncc_window();
  }
  if (proto.mi_bins() != 0) {
    if (proto.mi_bins() < kMattesMiMinBins || proto.mi_bins() > kMattesMiMaxBins) {
      return absl::InvalidArgumentError(absl::StrCat("options.mi_bins ", proto.mi_bins(), " must be in ",
                                                     kMattesMiMinBins, "..", kMattesMiMaxBins));
    }
    o.metric_options.mi_bins = proto.mi_bins();
  }
  o.device = proto.device().empty() ? default_device : proto.device();
  TESSERA_RETURN_IF_ERROR(CheckDeviceName(o.device, "options.device"));
  if (proto.patience() != 0) {
    if (proto.patience() < 1 || proto.patience() > kMaxIterations) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.patience ", proto.patience(), " must be in 1..", kMaxIterations));
    }
    o.patience = proto.patience();
  }
  if (proto.has_tolerance()) {
    if (!std::isfinite(proto.tolerance()) || proto.tolerance() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.tolerance ", proto.tolerance(), " must be finite and not negative"));
    }
    o.tolerance = proto.tolerance();
  }
  if (!proto.deformable_step().empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.deformable_step, ParseOption<DeformableStep>(proto.deformable_step(), "options.deformable_step"));
  }
  if (!proto.memory_mode().empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.memory_mode, ParseOption<MemoryMode>(proto.memory_mode(), "options.memory_mode"));
  }
  if (proto.has_linear_samples()) {
    if (proto.linear_samples() < 0 || proto.linear_samples() > kMaxLinearSamples) {
      return absl::InvalidArgumentError(absl::StrCat("options.linear_samples ", proto.linear_samples(),
                                                     " must be in 0..", kMaxLinearSamples, " (0 = every voxel)"));
    }
    o.linear_samples = proto.linear_samples();
  }
  if (proto.has_seed()) o.sampling_seed = proto.seed();
  if (proto.has_plateau_window_finest()) o.plateau_window_finest = proto.plateau_window_finest();
  if (proto.has_dense_finest_linear()) o.dense_finest_linear = proto.dense_finest_linear();
  if (proto.has_full_finest_deformable()) o.full_finest_deformable = proto.full_finest_deformable();
  if (proto.has_finest_remaining_gain()) {
    if (!std::isfinite(proto.finest_remaining_gain()) || proto.finest_remaining_gain() < 0 ||
        proto.finest_remaining_gain() >= 1) {
      return absl::InvalidArgumentError(absl::StrCat("options.finest_remaining_gain ", proto.finest_remaining_gain(),
                                                     " must be in [0, 1) (a fraction of |loss|; 0 = off)"));
    }
    o.finest_remaining_gain = proto.finest_remaining_gain();
  }
  if (proto.shards() < 0 || proto.shards() > kMaxShards) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.shards ", proto.shards(), " must be in 0..", kMaxShards, " (0 = one per GPU)"));
  }
  for (int i = 0; i < proto.gpus_size(); ++i) {
    const int ordinal = proto.gpus(i);
    if (ordinal < 0 || ordinal >= kMaxShards) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.gpus[", i, "] = ", ordinal, " is not a GPU ordinal in 0..", kMaxShards - 1));
    }
    if (std::find(o.gpus.begin(), o.gpus.end(), ordinal) != o.gpus.end()) {
      return absl::InvalidArgumentError(absl::StrCat("options.gpus lists GPU ", ordinal,
                                                     " twice (to put several ranks on one GPU, raise shards)"));
    }
    o.gpus.push_back(ordinal);
  }
  if (!o.gpus.empty() && o.device == "cpu") {
    return absl::InvalidArgumentError("options.gpus names GPUs but options.device is cpu");
  }
  o.shards = proto.shards() > 0 ? proto.shards() : std::max<int>(1, static_cast<int>(o.gpus.size()));
  if (!proto.deformable_model().empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.deformable_model, ParseOption<DeformableModel>(proto.deformable_model(), "options.deformable_model"));
  }
  if (proto.has_bspline_spacing_mm()) {
    const double s = proto.bspline_spacing_mm();
    if (!std::isfinite(s) || !(s > 0) || s > kMaxBsplineSpacingMm) {
      return absl::InvalidArgumentError(
          absl::StrCat("options.bspline_spacing_mm ", s, " must be in (0, ", kMaxBsplineSpacingMm, "] mm"));
    }
    o.bspline_spacing_mm = s;
  }
  if (o.deformable_model == DeformableModel::kBspline && o.shards > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("options.deformable_model bspline runs unsharded, but options.shards is ", o.shards));
  }
  if (!proto.precision().empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.precision, ParseOption<Precision>(proto.precision(), "options.precision"));
  }
  if (proto.device_memory_budget_bytes() < 0) {
    return absl::InvalidArgumentError(absl::StrCat("options.device_memory_budget_bytes ",
                                                   proto.device_memory_budget_bytes(), " must be >= 0 (0 = no limit)"));
  }
  o.device_memory_budget_bytes = proto.device_memory_budget_bytes();
  if (!proto.init().empty()) {
    TESSERA_ASSIGN_OR_RETURN(o.init, ParseOption<Init>(proto.init(), "options.init"));
  }
  return o;
}

absl::StatusOr<RegistrationOptions> ToRegistrarOptions(const v1::RegistrationOptions& proto,
                                                       const std::string& default_device) {
  TESSERA_ASSIGN_OR_RETURN(RegistrationOptions o, ParseRegistrationOptions(proto, default_device));
  TESSERA_RETURN_IF_ERROR(ResolveBackend(o.device).status());
  return o;
}

}  // namespace tessera::registration
