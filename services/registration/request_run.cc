#include "services/registration/request_run.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/durable_file.h"
#include "common/status.h"
#include "kernels/registration/pipeline/ants_transform_io.h"
#include "kernels/registration/pipeline/outputs.h"

namespace tessera::registration {
namespace {

namespace fs = std::filesystem;

absl::Status CheckContinue(const RequestRunContext& context) {
  if (context.cancel != nullptr && context.cancel->load()) return absl::CancelledError("registration cancelled");
  if (context.deadline != absl::InfiniteFuture() && absl::Now() > context.deadline) {
    return absl::DeadlineExceededError("registration stopped: its deadline passed");
  }
  return absl::OkStatus();
}

// The written files of `files`, as pointers to its fields.
std::vector<std::string*> WrittenFiles(OutputFiles& files) {
  std::vector<std::string*> out;
  for (std::string* path : {&files.warped, &files.warped_labels, &files.affine, &files.warp, &files.inverse_warp}) {
    if (!path->empty()) out.push_back(path);
  }
  return out;
}

// Copies `from` to `dir`/its name through a temporary name, so a reader
// never sees a partial file. Returns the new path.
absl::StatusOr<std::string> CopyInto(const std::string& from, const std::string& dir) {
  const std::string to = (fs::path(dir) / fs::path(from).filename()).string();
  const absl::Status copied = WriteFileAtomically(to, [&](const std::string& tmp) {
    std::error_code ec;
    fs::copy_file(from, tmp, fs::copy_options::overwrite_existing, ec);
    return ec ? absl::UnknownError(ec.message()) : absl::OkStatus();
  });
  if (!copied.ok()) return absl::PermissionDeniedError(absl::StrCat("cannot write ", to, ": ", copied.message()));
  return to;
}

// Writes the outputs into `dir` too (creating it; its parent exists) and
// points `files` there. DICOM outputs: each file of `from_dir`'s
// files.dicom_files into the same relative place (a series directory is
// emptied first, so it never mixes two runs' series).
absl::Status CopyOutputs(OutputFiles& files, const std::string& from_dir, const std::string& dir) {
  std::error_code ec;
  fs::create_directory(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  for (std::string* path : WrittenFiles(files)) {
    TESSERA_ASSIGN_OR_RETURN(*path, CopyInto(*path, dir));
  }
  for (std::string* path : {&files.warped_dicom, &files.warped_labels_dicom}) {
    if (path->empty()) continue;
    const fs::path copy = fs::path(dir) / fs::path(*path).filename();
    if (fs::is_directory(*path, ec)) {
      fs::remove_all(copy, ec);
      fs::create_directory(copy, ec);
      if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", copy.string(), ": ", ec.message()));
    }
    *path = copy.string();
  }
  for (const std::string& name : files.dicom_files) {
    TESSERA_RETURN_IF_ERROR(
        CopyInto((fs::path(from_dir) / name).string(), (fs::path(dir) / name).parent_path().string()).status());
  }
  return absl::OkStatus();
}

// `nifti_images`: warped.nii.gz (and warped_labels.nii.gz) were written, so
// DownloadResult can send them (not with output.format dicom).
v1::RegistrationResult ResultProto(const RequestOutcome& outcome, const RegistrationOptions& options,
                                   const std::string& job_id, bool nifti_images) {
  const RegistrationSummary& summary = outcome.summary;
  const RegistrationResult& r = summary.result;
  v1::RegistrationResult out;
  out.set_job_id(job_id);
  out.set_initial_loss(r.initial_loss);
  out.set_final_loss(r.final_loss);
  if (summary.dice_before) out.set_dice_before(*summary.dice_before);
  if (summary.dice_after) out.set_dice_after(*summary.dice_after);
  if (summary.dice_large_before) out.set_dice_large_before(*summary.dice_large_before);
  if (summary.dice_large_after) out.set_dice_large_after(*summary.dice_large_after);
  out.set_folded_percent(summary.folded_percent);
  if (r.jacobian.voxels > 0) out.set_min_jacobian(r.jacobian.min_det);
  out.set_seconds(r.seconds);
  out.set_peak_device_bytes(static_cast<int64_t>(r.peak_device_bytes));
  for (double v : r.affine_ras) out.add_affine_ras(v);
  out.set_backend(r.backend);
  for (const std::string& line : r.log) out.add_log(line);
  v1::RegistrationOutputFiles* files = out.mutable_files();
  files->set_warped(summary.files.warped);
  files->set_warped_labels(summary.files.warped_labels);
  files->set_affine(summary.files.affine);
  files->set_warp(summary.files.warp);
  files->set_inverse_warp(summary.files.inverse_warp);
  files->set_warped_dicom(summary.files.warped_dicom);
  files->set_warped_labels_dicom(summary.files.warped_labels_dicom);
  if (nifti_images) out.add_artifacts(v1::REGISTRATION_ARTIFACT_WARPED);
  if (nifti_images && !summary.warped_labels.empty()) out.add_artifacts(v1::REGISTRATION_ARTIFACT_WARPED_LABELS);
  if (!r.displacement_ras.empty()) out.add_artifacts(v1::REGISTRATION_ARTIFACT_WARP);
  if (!outcome.inverse_warp.empty()) out.add_artifacts(v1::REGISTRATION_ARTIFACT_INVERSE_WARP);
  out.add_artifacts(v1::REGISTRATION_ARTIFACT_AFFINE);
  out.set_metric(OptionName(options.metric));
  for (const Stage s : options.stages) out.add_stages(OptionName(s));
  for (int s : options.scales) out.add_scales(s);
  out.set_summary_json(SummaryToJson(summary, options));
  return out;
}

}  // namespace

absl::StatusOr<RequestOutcome> RunRegistrationRequest(const RequestSpec& spec, const RequestRunContext& context) {
  if (context.report) context.report(ReadingInputsProgress());
  const absl::Time reading = absl::Now();
  TESSERA_ASSIGN_OR_RETURN(RegistrationInputs inputs, MaterializeInputs(spec.inputs, spec.max_volume_bytes));
  const double read_seconds = absl::ToDoubleSeconds(absl::Now() - reading);
  TESSERA_RETURN_IF_ERROR(CheckContinue(context));

  RequestOutcome outcome;
  const std::string& write_dir = context.work_dir.empty() ? spec.output_dir : context.work_dir;
  TESSERA_ASSIGN_OR_RETURN(outcome.summary,
                           RunRegistration(inputs, spec.plan, write_dir, spec.inverse_warp,
                                           ToJobProgress(spec.plan.options, context.report), context.cancel,
                                           context.deadline, spec.output));
  RegistrationSummary& summary = outcome.summary;
  summary.result.log.push_back(absl::StrFormat("timing (wall): inputs read %.3f s", read_seconds));
  const RegistrationResult& r = summary.result;
  outcome.fixed_geometry = inputs.fixed.geometry;
  outcome.affine_mat = ItkAffineBytes(r.affine_ras, GridCentre(inputs.fixed));
  if (spec.inverse_warp && !r.displacement_ras.empty()) {
    if (!summary.files.inverse_warp.empty()) {
      TESSERA_ASSIGN_OR_RETURN(Volume inverse, ReadAntsWarp(summary.files.inverse_warp));
      outcome.inverse_warp = std::move(inverse.data);
    } else {
      TESSERA_ASSIGN_OR_RETURN(outcome.inverse_warp, InvertDisplacement(r.displacement_ras, inputs.fixed.geometry));
    }
  }
  if (!context.work_dir.empty()) {
    for (const std::string* path : WrittenFiles(summary.files)) {
      outcome.work_files.push_back(fs::path(*path).filename().string());
    }
    for (const std::string& name : summary.files.dicom_files) outcome.work_files.push_back(name);
    if (spec.output_dir.empty()) {
      summary.files = OutputFiles();
    } else {
      TESSERA_RETURN_IF_ERROR(CopyOutputs(summary.files, context.work_dir, spec.output_dir));
    }
  }
  outcome.result = ResultProto(outcome, spec.plan.options, context.job_id, spec.output.nifti);
  return outcome;
}

}  // namespace tessera::registration
