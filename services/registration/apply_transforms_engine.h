// The apply-transforms job engine (issue 34, services/jobs/engine.h): kind
// "apply_transforms", spec tessera.v1.ApplyTransformsRequest, result
// tessera.v1.ApplyTransformsResult. It runs kernels/registration/pipeline/
// apply_transforms.h (antsApplyTransforms' chains) for RegistrationService's
// ApplyTransforms, `tessera job submit apply-transforms` and, in the
// foreground, `tessera apply-transforms`.
//
// Inputs: server paths under the data roots (NIfTI or a DICOM series, as
// ReadVolumeFile); transforms as server paths (affine .mat/.txt/.tfm or a
// displacement field .nii/.nii.gz), inline affine bytes, or
// registration_job_id: the transforms of a succeeded registration job of this
// server, read from its published results (<results_dir>/<job id>/:
// 0Warp.nii.gz, 0GenericAffine.mat, 0InverseWarp.nii.gz). The engine itself
// does not know who submitted a job: RegistrationService.ApplyTransforms
// checks that its caller may see the registration job (and resolves a
// client's job_id to the scheduler's) before it submits.
// Outputs in the job's work directory (and output_dir): applied.nii.gz
// (float32 image, int32 labels for label interpolations and nearest of an
// integer input) and its DICOM forms per request.output (applied_dicom/,
// applied_seg.dcm), or applied_points.csv.
#ifndef TESSERA_SERVICES_REGISTRATION_APPLY_TRANSFORMS_ENGINE_H_
#define TESSERA_SERVICES_REGISTRATION_APPLY_TRANSFORMS_ENGINE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/registration/pipeline/apply_transforms.h"
#include "services/jobs/typed_engine.h"
#include "tessera/v1/registration.pb.h"

namespace tessera::registration {

// An ApplyTransformsRequest checked once (interpolation, shape of the request).
struct ApplyTransformsJobPlan {
  v1::ApplyTransformsRequest request;
  ApplyTransformsOptions options;
  bool points = false;  // a point set instead of a volume
};

// What a run produced (the CLI prints it; the engine packs `result`).
struct ApplyTransformsOutcome {
  v1::ApplyTransformsResult result;
  std::vector<std::string> work_files;  // relative to the work directory
  std::vector<std::string> log;
};

class ApplyTransformsEngine final : public jobs::TypedEngine<v1::ApplyTransformsRequest, ApplyTransformsJobPlan> {
 public:
  // `data_roots` as RegistrationEngine's; `registration_results_dir`: where
  // this server's succeeded jobs' results are (<state dir>/results); empty:
  // registration_job_id is FAILED_PRECONDITION.
  static absl::StatusOr<std::shared_ptr<const ApplyTransformsEngine>> Create(
      const std::vector<std::string>& data_roots, int64_t max_volume_bytes, const std::string& default_device,
      const std::string& registration_results_dir = "");

  std::string kind() const override { return "apply_transforms"; }

  // The whole run in the foreground (the CLI): files into `work_dir`
  // (existing), then output_dir.
  absl::StatusOr<ApplyTransformsOutcome> RunRequest(const v1::ApplyTransformsRequest& request,
                                                    const std::string& work_dir, const std::string& job_id) const;

  // The transform files of registration job `job_id` in ANTs order: warp (if
  // any) then affine; with `inverse`: affine (to invert) then inverse warp.
  // NOT_FOUND for no succeeded job of that id here; FAILED_PRECONDITION when
  // the inverse warp is asked for and the job did not compute it.
  struct JobTransform {
    std::string path;
    bool inverse = false;
  };
  absl::StatusOr<std::vector<JobTransform>> RegistrationJobTransforms(const std::string& job_id, bool inverse) const;

 protected:
  // INVALID_ARGUMENT: no input / both input and points, no transforms,
  // unknown interpolation, a negative label sigma, an inverse field path.
  absl::StatusOr<ApplyTransformsJobPlan> MakePlan(const v1::ApplyTransformsRequest& request) const override;
  // Paths under the roots, transform files readable and well-formed, the
  // registration jobs there, output options.
  absl::Status CheckPlan(const ApplyTransformsJobPlan& plan) const override;
  jobs::ResourceNeeds NeedsOf(const ApplyTransformsJobPlan& plan) const override;
  // The registration jobs whose transforms it reads (TransformSource.
  // registration_job_id): the scheduler checks the caller may see them.
  std::vector<std::string> ReferencedJobsOf(const ApplyTransformsJobPlan& plan) const override;
  absl::StatusOr<jobs::EngineOutput> RunPlan(const ApplyTransformsJobPlan& plan, jobs::EngineContext& ctx) const override;

 private:
  ApplyTransformsEngine(std::vector<std::string> roots, int64_t max_volume_bytes, std::string default_device,
                        std::string results_dir)
      : roots_(std::move(roots)),
        max_volume_bytes_(max_volume_bytes),
        default_device_(std::move(default_device)),
        results_dir_(std::move(results_dir)) {}

  absl::StatusOr<TransformChain> LoadChain(const v1::ApplyTransformsRequest& request) const;
  absl::StatusOr<ApplyTransformsOutcome> Run(const ApplyTransformsJobPlan& plan, const std::string& work_dir,
                                             const std::string& job_id, const jobs::EngineContext* ctx) const;

  const std::vector<std::string> roots_;
  const int64_t max_volume_bytes_;
  const std::string default_device_;
  const std::string results_dir_;
};

}  // namespace tessera::registration

#endif  // TESSERA_SERVICES_REGISTRATION_APPLY_TRANSFORMS_ENGINE_H_
