// One reader for "a volume path" wherever the project accepts one: a NIfTI
// file (common/nifti_io.h), or a DICOM series given as a directory, a zip or
// one DICOM file (dicom_series.h; a mixed set is refused with its list).
#ifndef TESSERA_COMMON_DICOM_VOLUME_FILE_H_
#define TESSERA_COMMON_DICOM_VOLUME_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/volume.h"

namespace tessera {

// `format`, when given, is set to "NIfTI-1", "NIfTI-2" or "DICOM".
absl::StatusOr<Volume> ReadVolumeFile(const std::string& path, std::string* format = nullptr);

}  // namespace tessera

#endif  // TESSERA_COMMON_DICOM_VOLUME_FILE_H_
