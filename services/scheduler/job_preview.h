// SchedulerService.GetPreview's body (issue 35), plain C++: a PNG of a
// succeeded job's main image, for consoles and clients without the server's
// disk or an image viewer.
//   registration, apply_transforms, reconstruction (any job with a NIfTI
//   result file): the sagittal | coronal | axial middle slices of the named
//   file, else of the kind's main image (warped.nii.gz, applied.nii.gz,
//   reconstruction.nii.gz), else of its first .nii/.nii.gz file
//   (common/image_preview.h's OrthogonalMidSlices);
//   som.train: the atlas's U-matrix (services/som/render.h), name "u-matrix".
// Shrunk so that the longer edge is at most max_edge pixels.
#ifndef TESSERA_SERVICES_SCHEDULER_JOB_PREVIEW_H_
#define TESSERA_SERVICES_SCHEDULER_JOB_PREVIEW_H_

#include <string>

#include "absl/status/statusor.h"
#include "tessera/v1/jobs.pb.h"
#include "tessera/v1/scheduler.pb.h"

namespace tessera::scheduler {

constexpr int kDefaultPreviewEdge = 512;
constexpr int kMinPreviewEdge = 64;
constexpr int kMaxPreviewEdge = 2048;

// The preview of `result` (a SUCCEEDED job's): request.max_edge 0 is the
// default, else 64..2048 (INVALID_ARGUMENT). request.name: one of the job's
// result files (NOT_FOUND otherwise; INVALID_ARGUMENT when not a NIfTI
// image), or "u-matrix" / empty for som.train. FAILED_PRECONDITION for a job
// without an image result (fingerprint search); DATA_LOSS when the file or
// atlas cannot be read any more.
absl::StatusOr<v1::JobPreview> RenderJobPreview(const v1::JobResult& result, const v1::JobPreviewRequest& request);

}  // namespace tessera::scheduler

#endif  // TESSERA_SERVICES_SCHEDULER_JOB_PREVIEW_H_
