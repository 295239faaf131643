// NIfTI-1 and NIfTI-2 reading and writing (.nii and .nii.gz) via nifti_clib.
//
// Geometry: the sform is used when its code is set, else the qform, else the
// pixdim scaling (NIfTI "method 1"); the result is RAS+ millimetres in
// Volume::geometry. Scaled data (scl_slope != 0 and not the identity) is
// returned as float32 with the scaling applied. Writing stores the geometry
// in both qform and sform (codes from NiftiWriteOptions).
#ifndef TESSERA_COMMON_NIFTI_IO_H_
#define TESSERA_COMMON_NIFTI_IO_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/volume.h"

namespace tessera {

struct NiftiInfo {
  int version = 1;          // 1 or 2
  int qform_code = 0;
  int sform_code = 0;
  int intent_code = 0;      // e.g. NIFTI_INTENT_VECTOR (1007) for displacement fields
  int on_disk_dtype = 0;    // NIfTI datatype code as stored
};

// Errors: NOT_FOUND (missing file), INVALID_ARGUMENT (not NIfTI, bad header,
// unsupported datatype), DATA_LOSS (truncated or corrupt data/compression).
absl::StatusOr<Volume> ReadNifti(const std::string& path, NiftiInfo* info = nullptr);

struct NiftiWriteOptions {
  int version = 1;          // 2 for NIfTI-2; chosen automatically when a dim > 32767
  int qform_code = 1;       // NIFTI_XFORM_SCANNER_ANAT
  int sform_code = 1;
  int intent_code = 0;
};

// Writes `volume` to `path`; ".nii.gz" compresses. The array must be on the host.
absl::Status WriteNifti(const Volume& volume, const std::string& path, const NiftiWriteOptions& options = {});

}  // namespace tessera

#endif  // TESSERA_COMMON_NIFTI_IO_H_
