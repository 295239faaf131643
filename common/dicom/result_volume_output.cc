#include "common/dicom/result_volume_output.h"

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/dicom/dicom_seg.h"
#include "common/dicom/dicom_series.h"
#include "common/nifti_io.h"
#include "common/status.h"

namespace tessera::dicom {
namespace {

namespace fs = std::filesystem;

std::string Stem(const std::string& nifti_name) {
  for (const char* ext : {".nii.gz", ".nii"}) {
    if (absl::EndsWith(nifti_name, ext)) return nifti_name.substr(0, nifti_name.size() - std::string(ext).size());
  }
  return nifti_name;
}

const char* SopClassName(const std::string& uid) {
  if (uid == "1.2.840.10008.5.1.4.1.1.2") return "CT Image Storage";
  if (uid == "1.2.840.10008.5.1.4.1.1.7") return "Secondary Capture Image Storage";
  if (uid == "1.2.840.10008.5.1.4.1.1.66.4") return "Segmentation Storage";
  return "DICOM";
}

}  // namespace

absl::StatusOr<ResultOutputPlan> PlanResultOutputs(const ResultOutputRequest& request, const std::string& salt,
                                                   const std::string& field_prefix, int64_t max_reference_bytes) {
  ResultOutputPlan plan;
  if (request.format.empty() || request.format == "nifti") {
    plan.nifti = true;
  } else if (request.format == "dicom") {
    plan.nifti = false;
    plan.dicom = true;
  } else if (request.format == "both") {
    plan.dicom = true;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(field_prefix, "format '", request.format,
                                                   "' is not one of nifti, dicom or both"));
  }
  if (!plan.dicom) {
    for (const auto& [set, field] : {std::pair<bool, const char*>{request.deidentify, "deidentify"},
                                     {!request.reference_series.empty(), "reference_series"},
                                     {!request.series_description.empty(), "series_description"}}) {
      if (set) {
        return absl::InvalidArgumentError(absl::StrCat(field_prefix, field, " applies to DICOM outputs only: set ",
                                                       field_prefix, "format to dicom or both"));
      }
    }
    return plan;
  }
  if (request.deidentify) {
    if (salt.empty()) return absl::InternalError("de-identification needs a per-job salt");
    plan.deidentify.enabled = true;
    plan.deidentify.salt = salt;
  }
  plan.series_description = request.series_description;
  if (!request.reference_series.empty()) {
    DicomReadOptions options;
    options.max_bytes = max_reference_bytes;
    absl::StatusOr<DicomSeries> series = ReadDicomSeries({request.reference_series}, options);
    if (!series.ok()) {
      return Annotate(series.status(), absl::StrCat(field_prefix, "reference_series '", request.reference_series,
                                                    "' is not a readable DICOM series"));
    }
    if (!series->info.files.empty() && absl::StrContains(series->info.files[0], "!")) {
      return absl::InvalidArgumentError(absl::StrCat(field_prefix, "reference_series '", request.reference_series,
                                                     "' is a zip archive: give the series' directory"));
    }
    plan.reference_series = request.reference_series;
  }
  return plan;
}

std::string DicomSeriesDirName(const std::string& nifti_name) { return Stem(nifti_name) + "_dicom"; }
std::string DicomSegFileName(const std::string& nifti_name) { return Stem(nifti_name) + "_seg.dcm"; }

absl::StatusOr<ResultVolumeFiles> WriteResultVolume(const Volume& volume, const std::string& dir,
                                                    const std::string& nifti_name, ResultVolumeKind kind,
                                                    const ResultOutputPlan& plan,
                                                    const std::string& default_description) {
  ResultVolumeFiles out;
  if (plan.nifti) {
    TESSERA_RETURN_IF_ERROR(WriteNifti(volume, (fs::path(dir) / nifti_name).string()));
    out.nifti = nifti_name;
    out.files.push_back(nifti_name);
  }
  if (!plan.dicom) return out;
  const std::string description = plan.series_description.empty() ? default_description : plan.series_description;
  if (kind == ResultVolumeKind::kLabels) {
    DicomSegWriteOptions options;
    options.series_description = description;
    options.reference = plan.reference_series;
    options.same_frame_of_reference = plan.same_frame_of_reference;
    options.deidentify = plan.deidentify;
    out.dicom = DicomSegFileName(nifti_name);
    absl::StatusOr<DicomWriteResult> written = WriteDicomSeg(volume, (fs::path(dir) / out.dicom).string(), options);
    if (!written.ok()) return Annotate(written.status(), absl::StrCat("writing ", out.dicom));
    out.files.push_back(out.dicom);
    out.note = absl::StrCat(out.dicom, ": Segmentation Storage, labels exact");
    return out;
  }
  DicomWriteOptions options;
  options.series_description = description;
  options.reference = plan.reference_series;
  options.same_frame_of_reference = plan.same_frame_of_reference;
  options.deidentify = plan.deidentify;
  options.values_are_hounsfield = plan.image_values_hounsfield;
  out.dicom = DicomSeriesDirName(nifti_name);
  const std::string series_dir = (fs::path(dir) / out.dicom).string();
  // A series directory holds this series only (a reader would refuse a mix).
  std::error_code ec;
  fs::remove_all(series_dir, ec);
  absl::StatusOr<DicomWriteResult> written = WriteDicomSeries(volume, series_dir, options);
  if (!written.ok()) return Annotate(written.status(), absl::StrCat("writing ", out.dicom, "/"));
  for (const std::string& file : written->files) {
    out.files.push_back((fs::path(out.dicom) / fs::path(file).filename()).string());
  }
  const bool exact = written->rescale_slope == 1 && written->max_abs_error == 0;
  out.note = absl::StrCat(
      out.dicom, "/: ", written->files.size(), " slices, ", SopClassName(written->sop_class_uid),
      exact ? ", values exact"
            : absl::StrFormat(", uint16 rescale (slope %.6g, intercept %.6g), max error %.3g", written->rescale_slope,
                              written->rescale_intercept, written->max_abs_error));
  return out;
}

}  // namespace tessera::dicom
