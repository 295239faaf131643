// Writes a registration's results as the files ANTs users know:
//   warped.nii.gz          moving image resampled on the fixed grid
//   warped_labels.nii.gz   moving labels, nearest neighbour (when given)
//   0GenericAffine.mat     ITK affine, fixed -> moving (LPS)
//   0Warp.nii.gz           displacement on the fixed grid (LPS mm vectors)
//   0InverseWarp.nii.gz    its inverse (on request)
// so that `antsApplyTransforms -r fixed -i moving -t 0Warp.nii.gz
// -t 0GenericAffine.mat` reproduces warped.nii.gz. With DICOM outputs
// (dicom::ResultOutputPlan, common/dicom/result_volume_output.h) the warped
// image is also (or only) the series warped_dicom/ and the warped labels the
// SEG warped_labels_seg.dcm; the transforms are always the ITK/ANTs files.
#ifndef TESSERA_KERNELS_REGISTRATION_PIPELINE_OUTPUTS_H_
#define TESSERA_KERNELS_REGISTRATION_PIPELINE_OUTPUTS_H_

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dicom/result_volume_output.h"
#include "kernels/registration/pipeline/registrar.h"

namespace tessera::registration {

struct OutputFiles {
  std::string warped, warped_labels, affine, warp, inverse_warp;  // empty when not written
  // DICOM outputs (empty when not written): the series directory and the SEG file.
  std::string warped_dicom, warped_labels_dicom;
  std::vector<std::string> dicom_files;  // every DICOM file, relative to the directory ("warped_dicom/IM00001.dcm")
  std::vector<std::string> notes;        // for the log: what each DICOM output holds (values, largest error)
};

absl::StatusOr<OutputFiles> WriteRegistrationOutputs(const RegistrationResult& result, const Volume& fixed,
                                                     const std::string& dir, const NDArray* warped_labels,
                                                     bool inverse_warp, const dicom::ResultOutputPlan& formats = {});

// WriteRegistrationOutputs in two steps, so that the files that depend only
// on the transforms (the warp above all) are written while the caller computes
// the warped labels and Dice. Start() creates `dir` and returns at once;
// Finish() writes warped_labels (when given) on the calling thread, waits for
// the rest and returns the files or the first error. Each file is written
// under a temporary name and renamed (WriteNifti, WriteItkAffine), so a crash
// leaves no partial file under a final name. `result` and `fixed` must outlive
// the writer; its destructor waits (dropping errors nobody asked for).
class OutputWriter {
 public:
  // `formats`: NIfTI (the default), DICOM or both for the warped image and labels.
  static absl::StatusOr<std::unique_ptr<OutputWriter>> Start(const RegistrationResult& result, const Volume& fixed,
                                                             const std::string& dir, bool inverse_warp,
                                                             const dicom::ResultOutputPlan& formats = {});
  OutputWriter(const OutputWriter&) = delete;
  OutputWriter& operator=(const OutputWriter&) = delete;
  ~OutputWriter();

  absl::StatusOr<OutputFiles> Finish(const NDArray* warped_labels);

 private:
  OutputWriter() = default;
  void WriteTransformOutputs(const RegistrationResult& result, const Volume& fixed, bool inverse_warp);
  // Records a written result volume's paths in `files` (default: files_).
  void AddResultVolume(const dicom::ResultVolumeFiles& written, std::string* nifti, std::string* dicom,
                       OutputFiles* files = nullptr);

  std::string dir_;
  const Volume* fixed_ = nullptr;
  dicom::ResultOutputPlan formats_;
  OutputFiles files_;           // filled by the background thread until joined
  absl::Status status_;         // the background thread's first error
  std::thread thread_;
};

// RAS mm of a volume's grid centre (the centre ITK affines are written about).
std::array<double, 3> GridCentre(const Volume& volume);

// Inverse of x -> x + v(x) on the same grid: w(y) = -v(y + w(y)), by
// fixed-point iteration with trilinear sampling of v (RAS mm, planar
// (nx, ny, nz, 3) float32 on `geometry`). Converges for fields without folds.
absl::StatusOr<NDArray> InvertDisplacement(const NDArray& displacement_ras, const Geometry& geometry,
                                           int iterations = 20);

// Applies ANTs' composition with plain CPU code, independently of the
// kernels: out(p) = moving(T(p + v(p))) for every fixed voxel p, trilinear,
// zero outside. `displacement_ras` may be empty (affine only). For tests.
absl::StatusOr<NDArray> ApplyAntsTransformsCpu(const Volume& moving, const Volume& fixed_like, const Mat4& affine_ras,
                                               const NDArray& displacement_ras);

}  // namespace tessera::registration

#endif  // TESSERA_KERNELS_REGISTRATION_PIPELINE_OUTPUTS_H_
