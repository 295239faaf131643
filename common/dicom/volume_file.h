// One reader for "a volume path" wherever the project accepts one: a NIfTI
// file (common/nifti_io.h), or a DICOM series given as a directory, a zip or
// one DICOM file (dicom_series.h; a mixed set is refused with its list), or
// a DICOM Segmentation file (dicom_seg.h: its labels, int32).
#ifndef TESSERA_COMMON_DICOM_VOLUME_FILE_H_
#define TESSERA_COMMON_DICOM_VOLUME_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/volume.h"

namespace tessera {

// `format`, when given, is set to "NIfTI-1", "NIfTI-2", "DICOM" or "DICOM SEG".
// `max_dicom_bytes` bounds the DICOM bytes read (files, uncompressed zip
// members; a SEG's file and the labels it expands to): RESOURCE_EXHAUSTED
// beyond. NIfTI size checks stay the caller's.
absl::StatusOr<Volume> ReadVolumeFile(const std::string& path, std::string* format = nullptr,
                                      int64_t max_dicom_bytes = int64_t{16} << 30);

}  // namespace tessera

#endif  // TESSERA_COMMON_DICOM_VOLUME_FILE_H_
