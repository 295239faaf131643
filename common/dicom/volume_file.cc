#include "common/dicom/volume_file.h"

#include <utility>

#include "common/dicom/dicom_seg.h"
#include "common/dicom/dicom_series.h"
#include "common/nifti_io.h"

namespace tessera {

absl::StatusOr<Volume> ReadVolumeFile(const std::string& path, std::string* format, int64_t max_dicom_bytes) {
  if (dicom::IsDicomSegFile(path)) {  // a Segmentation: its label volume (int32)
    absl::StatusOr<dicom::DicomSegVolume> seg = dicom::ReadDicomSeg(path, max_dicom_bytes);
    if (!seg.ok()) return seg.status();
    if (format != nullptr) *format = "DICOM SEG";
    return std::move(seg->labels);
  }
  if (dicom::IsDicomPath(path)) {
    dicom::DicomReadOptions options;
    options.max_bytes = max_dicom_bytes;
    absl::StatusOr<dicom::DicomSeries> series = dicom::ReadDicomSeries({path}, options);
    if (!series.ok()) return series.status();
    if (format != nullptr) *format = "DICOM";
    return std::move(series->volume);
  }
  NiftiInfo info;
  absl::StatusOr<Volume> volume = ReadNifti(path, &info);
  if (volume.ok() && format != nullptr) *format = info.version == 2 ? "NIfTI-2" : "NIfTI-1";
  return volume;
}

}  // namespace tessera
