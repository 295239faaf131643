// A result volume (a warped image, a label map, a reconstruction) written in
// the formats a request asked for (tessera.v1.OutputOptions): NIfTI, a
// derived DICOM series, or both. The one place registration,
// reconstruction and apply-transforms decide names and formats, so that
// "warped.nii.gz" always becomes "warped_dicom/" (an image: one file per
// slice, WriteDicomSeries) or "warped_labels_seg.dcm" (a label map: one DICOM
// Segmentation object, WriteDicomSeg). Plain C++: the services' adapter
// (services/common/output_options.h) turns the proto into a checked plan.
#ifndef TESSERA_COMMON_DICOM_RESULT_VOLUME_OUTPUT_H_
#define TESSERA_COMMON_DICOM_RESULT_VOLUME_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dicom/dicom_writer.h"
#include "common/volume.h"

namespace tessera::dicom {

// What a result volume is: an image (values, DICOM series) or a label map
// (integer labels, DICOM SEG).
enum class ResultVolumeKind { kImage, kLabels };

// OutputOptions checked and resolved (PlanResultOutputs).
struct ResultOutputPlan {
  bool nifti = true;
  bool dicom = false;
  Deidentification deidentify;     // DICOM only; salt random per job
  // A readable DICOM series (directory or file) whose patient and study the
  // DICOM outputs keep; empty: a new study with empty patient fields.
  std::string reference_series;
  // Whether the result lies in reference_series' patient space (registration
  // onto a DICOM fixed image): its FrameOfReferenceUID is kept.
  bool same_frame_of_reference = false;
  std::string series_description;  // empty: each output's default
  // Image results hold CT numbers (HU): a CT resampled by registration or
  // apply-transforms. With a CT reference they are then CT Image Storage
  // (DicomWriteOptions::values_are_hounsfield); reconstructions (1/mm) and
  // other intensities are Secondary Capture.
  bool image_values_hounsfield = false;
};

// The request's fields, as plain values (paths already resolved).
struct ResultOutputRequest {
  std::string format;  // "", "nifti", "dicom" or "both"
  bool deidentify = false;
  std::string reference_series;
  std::string series_description;
};

// INVALID_ARGUMENT naming `field_prefix` + the field ("output.format",
// "output.deidentify", ...): an unknown format, DICOM-only fields without a
// DICOM output, a reference series that is not a readable DICOM series (read
// with at most `max_reference_bytes`) or is a zip (the writers copy from its
// files). `salt`: the de-identification secret (random per job; required
// when deidentify). Errors reading the reference keep their code.
absl::StatusOr<ResultOutputPlan> PlanResultOutputs(const ResultOutputRequest& request, const std::string& salt,
                                                   const std::string& field_prefix = "output.",
                                                   int64_t max_reference_bytes = int64_t{4} << 30);

// "warped.nii.gz" -> "warped_dicom" (the series' directory) and
// "warped_labels.nii.gz" -> "warped_labels_seg.dcm" (the SEG file).
std::string DicomSeriesDirName(const std::string& nifti_name);
std::string DicomSegFileName(const std::string& nifti_name);

struct ResultVolumeFiles {
  std::vector<std::string> files;  // every file written, relative to the directory ("warped_dicom/IM00001.dcm")
  std::string nifti;               // relative name, or empty
  std::string dicom;               // "warped_dicom" (a directory) or "warped_labels_seg.dcm", or empty
  // For the job's log: what DICOM holds ("warped_dicom/: 96 slices, CT Image
  // Storage, uint16 rescale, max error 0.0012").
  std::string note;
};

// Writes `volume` into `dir` (existing) as `nifti_name` and/or its DICOM
// form, as `plan` says. `default_description`: the SeriesDescription when the
// plan gives none. Images: the writer's values rule (integers exact, others a
// linear uint16 rescale whose largest error the note states). Labels: one
// SEG. Each file is written under a temporary name and renamed (NIfTI) or
// written whole into its own directory (DICOM), so a reader of a job's
// published results never sees a partial one.
absl::StatusOr<ResultVolumeFiles> WriteResultVolume(const Volume& volume, const std::string& dir,
                                                    const std::string& nifti_name, ResultVolumeKind kind,
                                                    const ResultOutputPlan& plan,
                                                    const std::string& default_description);

}  // namespace tessera::dicom

#endif  // TESSERA_COMMON_DICOM_RESULT_VOLUME_OUTPUT_H_
