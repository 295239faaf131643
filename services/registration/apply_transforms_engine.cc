#include "services/registration/apply_transforms_engine.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/device.h"
#include "common/dicom/dicom_series.h"
#include "common/dicom/volume_file.h"
#include "common/durable_file.h"
#include "common/status.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "kernels/registration/pipeline/registration_job.h"
#include "services/common/data_roots.h"
#include "services/common/output_options.h"
#include "services/jobs/job_types.h"
#include "services/registration/request_inputs.h"

namespace tessera::registration {
namespace {

namespace fs = std::filesystem;

constexpr char kAppliedVolume[] = "applied.nii.gz";
constexpr char kAppliedPoints[] = "applied_points.csv";

bool IsFieldPath(const std::string& path) { return absl::EndsWith(path, ".nii") || absl::EndsWith(path, ".nii.gz"); }

// Job ids are [A-Za-z0-9._-] (ValidateJobId): nothing that could leave the
// results folder.
absl::Status CheckJobId(const std::string& id) {
  const absl::Status valid = jobs::ValidateJobId(id);
  if (!valid.ok()) return absl::InvalidArgumentError(absl::StrCat("transforms: registration_job_id: ", valid.message()));
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path, int64_t max_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::string bytes;
  char buf[1 << 16];
  while (in.read(buf, sizeof(buf)) || in.gcount() > 0) {
    bytes.append(buf, static_cast<size_t>(in.gcount()));
    if (static_cast<int64_t>(bytes.size()) > max_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(path, ": larger than ", max_bytes, " bytes"));
    }
  }
  return bytes;
}

// A volume file under the roots, read with the registration's bound.
absl::StatusOr<Volume> ReadInputVolume(const std::string& requested, const char* what,
                                       const std::vector<std::string>& roots, int64_t max_bytes) {
  TESSERA_ASSIGN_OR_RETURN(VolumeInput in, ResolveVolumePath(requested, what, roots, max_bytes));
  absl::StatusOr<Volume> read = ReadVolumeFile(in.path, nullptr, max_bytes + max_bytes / 8 + (int64_t{64} << 20));
  if (!read.ok()) return Annotate(read.status(), what);
  if (static_cast<int64_t>(read->data.nbytes()) > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(what, ": '", requested, "' holds ", read->data.nbytes(),
                                                     " bytes, more than the server's limit of ", max_bytes));
  }
  return read;
}

// Copies work_dir/name for every name into dir (created; nested names keep
// their folders) through temporary names. Returns the copies' paths.
absl::StatusOr<std::vector<std::string>> CopyOutputs(const std::string& work_dir, const std::vector<std::string>& names,
                                                     const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::create_directory(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  for (const std::string& name : names) {
    const fs::path to = fs::path(dir) / name;
    fs::create_directories(to.parent_path(), ec);
    const absl::Status copied = WriteFileAtomically(to.string(), [&](const std::string& tmp) {
      std::error_code copy_ec;
      fs::copy_file(fs::path(work_dir) / name, tmp, fs::copy_options::overwrite_existing, copy_ec);
      return copy_ec ? absl::UnknownError(copy_ec.message()) : absl::OkStatus();
    });
    if (!copied.ok()) return absl::PermissionDeniedError(absl::StrCat("cannot write ", to.string(), ": ", copied.message()));
    out.push_back(to.string());
  }
  return out;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const ApplyTransformsEngine>> ApplyTransformsEngine::Create(
    const std::vector<std::string>& data_roots, int64_t max_volume_bytes, const std::string& default_device,
    const std::string& registration_results_dir) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> roots, CanonicalDataRoots(data_roots));
  if (max_volume_bytes <= 0) return absl::InvalidArgumentError("max_volume_bytes must be positive");
  TESSERA_RETURN_IF_ERROR(CheckDeviceName(default_device, "default device"));
  return std::shared_ptr<const ApplyTransformsEngine>(
      new ApplyTransformsEngine(std::move(roots), max_volume_bytes, default_device, registration_results_dir));
}

absl::StatusOr<ApplyTransformsJobPlan> ApplyTransformsEngine::MakePlan(const v1::ApplyTransformsRequest& request) const {
  ApplyTransformsJobPlan plan;
  plan.request = request;
  const bool has_input = request.input().source_case() != v1::VolumeSource::SOURCE_NOT_SET;
  const bool has_points = !request.points_path().empty() || !request.points_csv().empty();
  if (has_input == has_points) {
    return absl::InvalidArgumentError(has_input ? "give either input or points (points_path / points_csv), not both"
                                                : "nothing to apply: set input (an image or label map) or points");
  }
  if (!request.points_path().empty() && !request.points_csv().empty()) {
    return absl::InvalidArgumentError("give points_path or points_csv, not both");
  }
  plan.points = has_points;
  if (has_input && request.reference().source_case() == v1::VolumeSource::SOURCE_NOT_SET) {
    return absl::InvalidArgumentError("reference: required for an input volume (the output grid)");
  }
  if (request.transforms().empty()) return absl::InvalidArgumentError("transforms: at least one is required");
  for (int i = 0; i < request.transforms_size(); ++i) {
    const v1::TransformSource& t = request.transforms(i);
    const std::string field = absl::StrCat("transforms[", i, "]");
    switch (t.source_case()) {
      case v1::TransformSource::kPath:
        if (t.path().empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": empty path"));
        if (t.inverse() && IsFieldPath(t.path())) {
          return absl::InvalidArgumentError(absl::StrCat(
              field, ": '", t.path(),
              "' is a displacement field, which cannot be inverted on the fly; give its inverse file (0InverseWarp.nii.gz)"));
        }
        break;
      case v1::TransformSource::kAffineFile:
        TESSERA_RETURN_IF_ERROR(AffineTransformFromBytes(t.affine_file(), field, t.inverse()).status());
        break;
      case v1::TransformSource::kRegistrationJobId:
        TESSERA_RETURN_IF_ERROR(CheckJobId(t.registration_job_id()));
        break;
      default:
        return absl::InvalidArgumentError(absl::StrCat(field, ": set path, affine_file or registration_job_id"));
    }
  }
  TESSERA_ASSIGN_OR_RETURN(plan.options.interpolation, ParseApplyInterpolation(request.interpolation()));
  if (!(request.label_sigma_mm() >= 0) || !std::isfinite(request.label_sigma_mm())) {
    return absl::InvalidArgumentError("label_sigma_mm must be a finite value >= 0 (0: the input's mean spacing)");
  }
  if (!std::isfinite(request.default_value())) return absl::InvalidArgumentError("default_value must be finite");
  plan.options.label_sigma_mm = request.label_sigma_mm();
  plan.options.default_value = request.default_value();
  plan.options.device = request.device().empty() ? default_device_ : request.device();
  TESSERA_RETURN_IF_ERROR(CheckDeviceName(plan.options.device, "device"));
  return plan;
}

absl::StatusOr<std::vector<ApplyTransformsEngine::JobTransform>> ApplyTransformsEngine::RegistrationJobTransforms(
    const std::string& job_id, bool inverse) const {
  TESSERA_RETURN_IF_ERROR(CheckJobId(job_id));
  if (results_dir_.empty()) {
    return absl::FailedPreconditionError(
        "transforms: registration_job_id needs a server with a scheduler (its jobs' results); give the files instead");
  }
  const fs::path dir = fs::path(results_dir_) / job_id;
  std::error_code ec;
  const fs::path affine = dir / "0GenericAffine.mat";
  if (!fs::is_regular_file(affine, ec)) {
    return absl::NotFoundError(absl::StrCat("transforms: no succeeded registration job '", job_id, "' on this server"));
  }
  const fs::path warp = dir / "0Warp.nii.gz", inverse_warp = dir / "0InverseWarp.nii.gz";
  const bool has_warp = fs::is_regular_file(warp, ec);
  std::vector<JobTransform> out;
  if (!inverse) {
    if (has_warp) out.push_back({warp.string(), false});
    out.push_back({affine.string(), false});
    return out;
  }
  out.push_back({affine.string(), true});
  if (has_warp) {
    if (!fs::is_regular_file(inverse_warp, ec)) {
      return absl::FailedPreconditionError(absl::StrCat("transforms: registration job '", job_id,
                                                        "' has no inverse warp (register with options.inverse_warp)"));
    }
    out.push_back({inverse_warp.string(), false});
  }
  return out;
}

absl::StatusOr<TransformChain> ApplyTransformsEngine::LoadChain(const v1::ApplyTransformsRequest& request) const {
  TransformChain chain;
  for (int i = 0; i < request.transforms_size(); ++i) {
    const v1::TransformSource& t = request.transforms(i);
    const std::string field = absl::StrCat("transforms[", i, "]");
    switch (t.source_case()) {
      case v1::TransformSource::kPath: {
        absl::StatusOr<std::string> path = ResolveUnderRoots(t.path(), roots_);
        if (!path.ok()) return Annotate(path.status(), field);
        if (IsFieldPath(*path)) {
          absl::StatusOr<ChainTransform> loaded = LoadTransformFile(*path, false);
          if (!loaded.ok()) return Annotate(loaded.status(), field);
          chain.push_back(*std::move(loaded));
        } else {
          TESSERA_ASSIGN_OR_RETURN(std::string bytes, ReadSmallFile(*path, 1 << 20));
          absl::StatusOr<ChainTransform> loaded = AffineTransformFromBytes(bytes, t.path(), t.inverse());
          if (!loaded.ok()) return Annotate(loaded.status(), field);
          chain.push_back(*std::move(loaded));
        }
        break;
      }
      case v1::TransformSource::kAffineFile: {
        TESSERA_ASSIGN_OR_RETURN(ChainTransform loaded, AffineTransformFromBytes(t.affine_file(), field, t.inverse()));
        chain.push_back(std::move(loaded));
        break;
      }
      case v1::TransformSource::kRegistrationJobId: {
        TESSERA_ASSIGN_OR_RETURN(std::vector<JobTransform> files,
                                 RegistrationJobTransforms(t.registration_job_id(), t.inverse()));
        for (const JobTransform& f : files) {
          absl::StatusOr<ChainTransform> loaded = LoadTransformFile(f.path, f.inverse);
          if (!loaded.ok()) {
            // A published result that cannot be read: the state directory is damaged.
            return absl::DataLossError(absl::StrCat(field, ": ", loaded.status().message()));
          }
          chain.push_back(*std::move(loaded));
        }
        break;
      }
      default:
        return absl::InvalidArgumentError(absl::StrCat(field, ": no source"));
    }
  }
  return chain;
}

absl::Status ApplyTransformsEngine::CheckPlan(const ApplyTransformsJobPlan& plan) const {
  const v1::ApplyTransformsRequest& request = plan.request;
  std::string reference_path;
  for (const auto& [source, what] : {std::pair<const v1::VolumeSource*, const char*>{&request.reference(), "reference"},
                                     {&request.input(), "input"}}) {
    if (source->source_case() == v1::VolumeSource::kFileId) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": file_id '", source->file_id(),
          "' is resolved by RegistrationService.ApplyTransforms (submit through it); give a server path"));
    }
    if (source->source_case() == v1::VolumeSource::kUploadId) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": upload_id '", source->upload_id(),
          "' names a volume held in one server's memory, which a scheduled job cannot rely on; give a server path "
          "(RegistrationService.ApplyTransforms writes its uploads to files for you)"));
    }
    if (source->has_path()) {
      TESSERA_ASSIGN_OR_RETURN(VolumeInput in, ResolveVolumePath(source->path(), what, roots_, max_volume_bytes_));
      if (source == &request.reference()) reference_path = in.path;
    }
  }
  if (!request.points_path().empty()) {
    absl::StatusOr<std::string> path = ResolveUnderRoots(request.points_path(), roots_);
    if (!path.ok()) return Annotate(path.status(), "points_path");
  }
  // Affines are small: read and parse them now; fields are checked to exist.
  for (int i = 0; i < request.transforms_size(); ++i) {
    const v1::TransformSource& t = request.transforms(i);
    const std::string field = absl::StrCat("transforms[", i, "]");
    if (t.has_path()) {
      absl::StatusOr<std::string> path = ResolveUnderRoots(t.path(), roots_);
      if (!path.ok()) return Annotate(path.status(), field);
      if (!IsFieldPath(*path)) {
        TESSERA_ASSIGN_OR_RETURN(std::string bytes, ReadSmallFile(*path, 1 << 20));
        absl::Status parsed = AffineTransformFromBytes(bytes, t.path(), t.inverse()).status();
        if (!parsed.ok()) return Annotate(parsed, field);
      }
    } else if (t.source_case() == v1::TransformSource::kRegistrationJobId) {
      TESSERA_RETURN_IF_ERROR(RegistrationJobTransforms(t.registration_job_id(), t.inverse()).status());
    }
  }
  if (!plan.points) {
    TESSERA_RETURN_IF_ERROR(ResolveOutputOptions(request.output(), roots_, reference_path, max_volume_bytes_).status());
  } else if (!request.output().format().empty() && request.output().format() != "nifti") {
    return absl::InvalidArgumentError("output.format: a point set is written as CSV; DICOM outputs are for volumes");
  }
  if (!request.output_dir().empty()) {
    absl::StatusOr<std::string> dir = ResolveOutputDirUnderRoots(request.output_dir(), roots_);
    if (!dir.ok()) return Annotate(dir.status(), "output_dir");
  }
  return absl::OkStatus();
}

jobs::ResourceNeeds ApplyTransformsEngine::NeedsOf(const ApplyTransformsJobPlan& plan) const {
  jobs::ResourceNeeds needs;
  // Points and the label interpolations run on the CPU whatever the device.
  const ApplyInterpolation interp = plan.options.interpolation;
  needs.needs_gpu = !plan.points && plan.options.device == "cuda" && interp != ApplyInterpolation::kLabel &&
                    interp != ApplyInterpolation::kGenericLabel;
  return needs;
}

absl::StatusOr<ApplyTransformsOutcome> ApplyTransformsEngine::Run(const ApplyTransformsJobPlan& plan,
                                                                  const std::string& work_dir,
                                                                  const std::string& job_id,
                                                                  const jobs::EngineContext* ctx) const {
  const absl::Time start = absl::Now();
  const v1::ApplyTransformsRequest& request = plan.request;
  auto report = [ctx](const char* stage, double fraction) {
    if (ctx == nullptr) return;
    jobs::JobProgress progress;
    progress.stage = stage;
    progress.fraction = fraction;
    ctx->Report(progress);
  };
  auto check = [ctx]() { return ctx == nullptr ? absl::OkStatus() : ctx->CheckContinue(); };
  report("input", 0);
  TESSERA_ASSIGN_OR_RETURN(const TransformChain chain, LoadChain(request));
  TESSERA_RETURN_IF_ERROR(check());
  std::string output_dir;
  if (!request.output_dir().empty()) {
    absl::StatusOr<std::string> dir = ResolveOutputDirUnderRoots(request.output_dir(), roots_);
    if (!dir.ok()) return Annotate(dir.status(), "output_dir");
    output_dir = *std::move(dir);
  }
  ApplyTransformsOutcome outcome;
  v1::ApplyTransformsResult& result = outcome.result;
  result.set_job_id(job_id);
  result.set_interpolation(ApplyInterpolationName(plan.options.interpolation));
  if (plan.points) {
    std::string csv = request.points_csv();
    std::string name = "points_csv";
    if (!request.points_path().empty()) {
      absl::StatusOr<std::string> path = ResolveUnderRoots(request.points_path(), roots_);
      if (!path.ok()) return Annotate(path.status(), "points_path");
      TESSERA_ASSIGN_OR_RETURN(csv, ReadSmallFile(*path, int64_t{1} << 30));
      name = request.points_path();
    }
    report("apply", 0.2);
    TESSERA_ASSIGN_OR_RETURN(AppliedPoints applied, ApplyTransformsToPoints(csv, name, chain));
    const absl::Status written = WriteFileAtomically((fs::path(work_dir) / kAppliedPoints).string(), applied.csv);
    if (!written.ok()) return absl::PermissionDeniedError(written.message());
    outcome.work_files.push_back(kAppliedPoints);
    result.set_points(applied.points);
    result.set_backend("cpu");
  } else {
    TESSERA_ASSIGN_OR_RETURN(const Volume reference,
                             ReadInputVolume(request.reference().path(), "reference", roots_, max_volume_bytes_));
    TESSERA_ASSIGN_OR_RETURN(const Volume input,
                             ReadInputVolume(request.input().path(), "input", roots_, max_volume_bytes_));
    TESSERA_RETURN_IF_ERROR(check());
    // DICOM outputs keep the reference's patient and study (the result lies on its grid).
    absl::StatusOr<std::string> reference_path = ResolveFileOrDirUnderRoots(request.reference().path(), roots_);
    TESSERA_ASSIGN_OR_RETURN(
        dicom::ResultOutputPlan output_plan,
        ResolveOutputOptions(request.output(), roots_, reference_path.ok() ? *reference_path : "", max_volume_bytes_));
    // A CT input resampled keeps its CT numbers (a CT Image Storage result).
    absl::StatusOr<std::string> input_path = ResolveFileOrDirUnderRoots(request.input().path(), roots_);
    output_plan.image_values_hounsfield = input_path.ok() && dicom::PeekDicomModality(*input_path) == "CT";
    report("apply", 0.2);
    GridSpace grid = SpaceOf(reference);
    if (reference.data.rank() < 3) return absl::InvalidArgumentError("reference: not a 3-D volume");
    TESSERA_ASSIGN_OR_RETURN(AppliedVolume applied, ApplyTransformsToVolume(input, grid, chain, plan.options));
    TESSERA_RETURN_IF_ERROR(check());
    report("output", 0.9);
    const bool labels = applied.volume.data.dtype() == DType::kInt32;
    TESSERA_ASSIGN_OR_RETURN(
        dicom::ResultVolumeFiles files,
        dicom::WriteResultVolume(applied.volume, work_dir, kAppliedVolume,
                                 labels ? dicom::ResultVolumeKind::kLabels : dicom::ResultVolumeKind::kImage,
                                 output_plan, "tessera apply-transforms"));
    outcome.work_files = files.files;
    if (!files.note.empty()) applied.log.push_back(files.note);
    for (int a = 0; a < 3; ++a) result.add_dims(applied.volume.data.dim(a));
    result.set_backend(applied.backend);
    outcome.log = std::move(applied.log);
  }
  for (const std::string& name : outcome.work_files) result.add_files(name);
  if (!output_dir.empty()) {
    TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> copies, CopyOutputs(work_dir, outcome.work_files, output_dir));
    for (const std::string& path : copies) result.add_output_paths(path);
  }
  result.set_seconds(absl::ToDoubleSeconds(absl::Now() - start));
  return outcome;
}

absl::StatusOr<ApplyTransformsOutcome> ApplyTransformsEngine::RunRequest(const v1::ApplyTransformsRequest& request,
                                                                         const std::string& work_dir,
                                                                         const std::string& job_id) const {
  TESSERA_ASSIGN_OR_RETURN(ApplyTransformsJobPlan plan, MakePlan(request));
  TESSERA_RETURN_IF_ERROR(CheckPlan(plan));
  return Run(plan, work_dir, job_id, nullptr);
}

std::vector<std::string> ApplyTransformsEngine::ReferencedJobsOf(const ApplyTransformsJobPlan& plan) const {
  std::vector<std::string> ids;
  for (const v1::TransformSource& t : plan.request.transforms()) {
    if (t.source_case() == v1::TransformSource::kRegistrationJobId) ids.push_back(t.registration_job_id());
  }
  return ids;
}

absl::StatusOr<jobs::EngineOutput> ApplyTransformsEngine::RunPlan(const ApplyTransformsJobPlan& plan,
                                                                  jobs::EngineContext& ctx) const {
  TESSERA_ASSIGN_OR_RETURN(ApplyTransformsOutcome outcome, Run(plan, ctx.work_dir(), ctx.job_id(), &ctx));
  jobs::EngineOutput out;
  out.result.PackFrom(outcome.result);
  TESSERA_ASSIGN_OR_RETURN(out.files, jobs::DescribeWorkFiles(ctx.work_dir(), outcome.work_files));
  return out;
}

}  // namespace tessera::registration
