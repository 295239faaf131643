#include "services/scheduler/job_preview.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/image_preview.h"
#include "common/nifti_io.h"
#include "common/png_io.h"
#include "common/status.h"
#include "common/text_checks.h"
#include "services/som/atlas.h"
#include "services/som/render.h"
#include "tessera/v1/som.pb.h"

namespace tessera::scheduler {
namespace {

constexpr char kUMatrix[] = "u-matrix";

bool IsNifti(const std::string& name) { return absl::EndsWith(name, ".nii") || absl::EndsWith(name, ".nii.gz"); }

// The image a job of `kind` is about, when it wrote it.
const char* MainImageOf(const std::string& kind) {
  if (kind == "registration") return "warped.nii.gz";
  if (kind == "apply_transforms") return "applied.nii.gz";
  if (kind == "reconstruction") return "reconstruction.nii.gz";
  return "";
}

absl::StatusOr<Image8> UMatrixPreview(const v1::JobResult& result, int max_edge) {
  v1::AtlasSummary summary;
  if (!result.result().UnpackTo(&summary) || summary.directory().empty()) {
    return absl::DataLossError(absl::StrCat("job '", result.job_id(), "' holds no atlas summary"));
  }
  absl::StatusOr<som::Atlas> atlas = som::LoadAtlas(summary.directory());
  if (!atlas.ok()) {
    return absl::DataLossError(absl::StrCat("job '", result.job_id(), "': atlas '", summary.atlas_id(),
                                            "' cannot be read: ", atlas.status().message()));
  }
  // Cells as large as fit (the colour bar takes a little more width).
  const int64_t cells = std::max<int64_t>({1, atlas->model.grid.width, atlas->model.grid.height});
  som::RenderOptions options;
  options.cell_pixels = static_cast<int>(std::clamp<int64_t>(max_edge * 4 / 5 / cells, 1, 256));
  options.colour_bar = true;
  return som::RenderUMatrix(*atlas, options);
}

absl::StatusOr<std::pair<std::string, Image8>> VolumePreview(const v1::JobResult& result, const std::string& asked) {
  const v1::ResultFile* file = nullptr;
  for (const v1::ResultFile& f : result.files()) {
    if (!asked.empty() ? f.name() == asked : f.name() == MainImageOf(result.kind())) file = &f;
  }
  if (!asked.empty() && file == nullptr) {
    return absl::NotFoundError(absl::StrCat("job '", result.job_id(), "' has no result file ", QuoteBounded(asked, 200)));
  }
  if (file == nullptr) {  // no main image of its kind: its first NIfTI
    for (const v1::ResultFile& f : result.files()) {
      if (IsNifti(f.name())) {
        file = &f;
        break;
      }
    }
  }
  if (file == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat("job '", result.job_id(), "' (", result.kind(),
                                                      ") has no image result to preview"));
  }
  if (!IsNifti(file->name())) {
    return absl::InvalidArgumentError(
        absl::StrCat("name: ", QuoteBounded(file->name(), 200), " is not a NIfTI image (.nii, .nii.gz)"));
  }
  absl::StatusOr<Volume> volume = ReadNifti(file->path());
  if (!volume.ok()) {
    return absl::DataLossError(absl::StrCat("job '", result.job_id(), "': ", file->name(),
                                            " cannot be read: ", volume.status().message()));
  }
  TESSERA_ASSIGN_OR_RETURN(Image8 image, OrthogonalMidSlices(*volume));
  return std::make_pair(file->name(), std::move(image));
}

}  // namespace

absl::StatusOr<v1::JobPreview> RenderJobPreview(const v1::JobResult& result, const v1::JobPreviewRequest& request) {
  const int max_edge = request.max_edge() == 0 ? kDefaultPreviewEdge : request.max_edge();
  if (max_edge < kMinPreviewEdge || max_edge > kMaxPreviewEdge) {
    return absl::InvalidArgumentError(absl::StrCat("max_edge ", request.max_edge(), " must be within ",
                                                   kMinPreviewEdge, "..", kMaxPreviewEdge, " (0: ",
                                                   kDefaultPreviewEdge, ")"));
  }
  std::string name;
  Image8 image;
  if (result.kind() == "som.train") {
    if (!request.name().empty() && request.name() != kUMatrix) {
      return absl::InvalidArgumentError(
          absl::StrCat("name: a som.train job's preview is its \"", kUMatrix, "\"; got ", QuoteBounded(request.name(), 200)));
    }
    TESSERA_ASSIGN_OR_RETURN(image, UMatrixPreview(result, max_edge));
    name = kUMatrix;
  } else {
    TESSERA_ASSIGN_OR_RETURN(auto named, VolumePreview(result, request.name()));
    name = std::move(named.first);
    image = std::move(named.second);
  }
  TESSERA_ASSIGN_OR_RETURN(image, ShrinkToFit(image, max_edge));
  TESSERA_ASSIGN_OR_RETURN(std::string png, EncodePngBytes(image));
  v1::JobPreview preview;
  preview.set_job_id(result.job_id());
  preview.set_name(name);
  preview.set_png(std::move(png));
  preview.set_width(image.width);
  preview.set_height(image.height);
  return preview;
}

}  // namespace tessera::scheduler
