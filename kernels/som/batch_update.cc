// Argument checks and backend dispatch for the batch update and box blur.
#include "kernels/som/batch_update.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "kernels/som/bmu.h"

namespace tessera {
namespace som {

BoxBlur BoxBlurForRadius(double radius, int passes) {
  BoxBlur blur;
  blur.passes = passes < 1 ? 1 : passes;
  if (!(radius > 0)) return blur;
  const double b = (std::sqrt(12.0 * radius * radius / blur.passes + 1.0) - 1.0) / 2.0;
  blur.half_width = static_cast<int>(std::lround(b));
  if (blur.half_width == 0 && radius > 0.25) blur.side_weight = std::exp(-1.0 / (2.0 * radius * radius));
  return blur;
}

double EffectiveSigma(const BoxBlur& blur) {
  if (blur.half_width == 0) return std::sqrt(2.0 * blur.side_weight / (1.0 + 2.0 * blur.side_weight));
  const double w = 2.0 * blur.half_width + 1.0;
  return std::sqrt(blur.passes * (w * w - 1.0) / 12.0);
}

absl::Status CheckGrid(const GridShape& grid, const char* who) {
  if (grid.width <= 0 || grid.height <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": grid must be at least 1x1, got ", grid.width, "x",
                                                   grid.height));
  }
  return absl::OkStatus();
}

namespace {
absl::Status CheckBlur(const BoxBlur& blur, const char* who) {
  if (blur.half_width < 0 || blur.passes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": negative box half-width or passes"));
  }
  if (!(blur.side_weight >= 0 && blur.side_weight <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(who, ": 3-tap side weight must be in [0, 1]"));
  }
  return absl::OkStatus();
}
}  // namespace

absl::Status BatchUpdate(const Stream& stream, const CscView& docs, const int32_t* bmu, const GridShape& grid,
                         const BoxBlur& blur, const CodebookView& codebook, SomWorkspace* workspace,
                         const UpdateOptions& options) {
  TESSERA_RETURN_IF_ERROR(CheckGrid(grid, "BatchUpdate"));
  TESSERA_RETURN_IF_ERROR(CheckBlur(blur, "BatchUpdate"));
  TESSERA_RETURN_IF_ERROR(CheckCodebook(codebook, "BatchUpdate"));
  if (codebook.layout != CodebookLayout::kFeatureMajor) {
    return absl::InvalidArgumentError("BatchUpdate: the codebook must be feature-major");
  }
  if (codebook.nodes != grid.nodes()) {
    return absl::InvalidArgumentError(absl::StrCat("BatchUpdate: codebook has ", codebook.nodes, " nodes, grid ",
                                                   GridToString(grid), " has ", grid.nodes()));
  }
  if (docs.features != codebook.features) {
    return absl::InvalidArgumentError(absl::StrCat("BatchUpdate: documents have ", docs.features,
                                                   " features, the codebook ", codebook.features));
  }
  if (docs.docs > 0 && bmu == nullptr) return absl::InvalidArgumentError("BatchUpdate: bmu is null");
  if (docs.offsets == nullptr) return absl::InvalidArgumentError("BatchUpdate: CSC offsets are null");
  const GroupDriftView& drift = options.group_drift;
  const bool with_drift = drift.weight_rise != nullptr || drift.norm_change != nullptr;
  if (with_drift && (drift.weight_rise == nullptr || drift.norm_change == nullptr || drift.strip_nodes < 1 ||
                     drift.groups != GroupCount(codebook.nodes, drift.strip_nodes))) {
    return absl::InvalidArgumentError("BatchUpdate: group drift needs both tables and the map's group count");
  }
  if (stream.backend() == Backend::kCpu) {
    cpu::BatchUpdate(docs, bmu, grid, blur, codebook, with_drift ? &drift : nullptr);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::BatchUpdate(stream, docs, bmu, grid, blur, codebook, workspace, options);
#else
  (void)workspace;
  (void)options;
  return absl::FailedPreconditionError(
      absl::StrCat("BatchUpdate: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

absl::Status BoxBlurPlanes(const Stream& stream, float* planes, int64_t num_planes, const GridShape& grid,
                           const BoxBlur& blur, SomWorkspace* workspace) {
  TESSERA_RETURN_IF_ERROR(CheckGrid(grid, "BoxBlurPlanes"));
  TESSERA_RETURN_IF_ERROR(CheckBlur(blur, "BoxBlurPlanes"));
  if (num_planes < 0 || (num_planes > 0 && planes == nullptr)) {
    return absl::InvalidArgumentError("BoxBlurPlanes: bad planes");
  }
  if (stream.backend() == Backend::kCpu) {
    cpu::BlurScratch scratch;
    for (int64_t p = 0; p < num_planes; ++p) cpu::BoxBlurPlane(planes + p * grid.nodes(), grid, blur, scratch);
    return absl::OkStatus();
  }
#if TESSERA_WITH_CUDA
  return cuda::BoxBlurPlanes(stream, planes, num_planes, grid, blur, workspace);
#else
  (void)workspace;
  return absl::FailedPreconditionError(
      absl::StrCat("BoxBlurPlanes: CUDA stream given but ", DeviceRegistry::Get().cuda_unavailable_reason()));
#endif
}

}  // namespace som
}  // namespace tessera
