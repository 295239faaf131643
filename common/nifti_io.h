// NIfTI-1 and NIfTI-2 reading and writing (.nii and .nii.gz) via nifti_clib.
//
// Geometry: the sform is used when its code is set, else the qform, else the
// pixdim scaling (NIfTI "method 1"); the result is RAS+ millimetres in
// Volume::geometry (metre and micron xyz units are converted to mm). Scaled
// data (scl_slope != 0 and not the identity) is returned as float32 with the
// scaling applied (float64 data stays float64). Writing stores the geometry
// in both qform and sform (codes from NiftiWriteOptions).
//
// Shapes: Volume::data is (nx, ny, nz) or (nx, ny, nz, components), so
//   - 1-D and 2-D images read as (nx, 1, 1) and (nx, ny, 1);
//   - 4-D images read as (nx, ny, nz, nt);
//   - 5-D images with nt == 1 (vector images such as ITK/ANTs displacement
//     fields, stored as (nx, ny, nz, 1, nc)) read as (nx, ny, nz, nc);
//   - other 5-, 6- and 7-D images keep all their dimensions.
// NiftiInfo::dims always holds the dimensions exactly as stored. On writing,
// a 4-D array is stored as (nx, ny, nz, 1, nc) when the intent code is a
// vector-valued one (DISPVECT, VECTOR, GENMATRIX, SYMMATRIX, POINTSET,
// TRIANGLE, QUATERNION, RGB_VECTOR, RGBA_VECTOR), else as 4-D.
//
// Only single-file NIfTI (.nii, .nii.gz) is supported; .hdr/.img pairs and
// ANALYZE 7.5 are rejected with INVALID_ARGUMENT. Header extensions are
// skipped on reading and none are written. The file IO itself is done here
// (nifti_clib is used for the header structures, byte swapping, quaternion
// conversion and header creation), so that a corrupt file can never make the
// library read or allocate past what the header justifies, and so that
// NaN/Inf voxels are kept (nifti_image_read replaces them by 0).
//
// Gzip: .nii.gz files are written as independent gzip members compressed in
// parallel with libdeflate (common/parallel_gzip.h; every gzip reader accepts
// multi-member files). Files written that way are read with libdeflate in
// parallel; other gzip files, and any file libdeflate cannot decode cleanly,
// through the streaming zlib reader, which names the damage (DATA_LOSS).
#ifndef TESSERA_COMMON_NIFTI_IO_H_
#define TESSERA_COMMON_NIFTI_IO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/volume.h"

namespace tessera {

struct NiftiInfo {
  int version = 1;          // 1 or 2
  int qform_code = 0;
  int sform_code = 0;
  int intent_code = 0;      // e.g. NIFTI_INTENT_VECTOR (1007) for displacement fields
  int on_disk_dtype = 0;    // NIfTI datatype code as stored
  std::vector<int64_t> dims;  // dim[1..dim[0]] exactly as stored
  double scl_slope = 0;     // as stored (0 = no scaling)
  double scl_inter = 0;
};

// Errors: NOT_FOUND (missing file), INVALID_ARGUMENT (not NIfTI, bad header,
// unsupported datatype), DATA_LOSS (truncated or corrupt data/compression).
// Every message starts with the path.
absl::StatusOr<Volume> ReadNifti(const std::string& path, NiftiInfo* info = nullptr);

struct NiftiReadOptions {
  // false: decode gzip with the streaming zlib reader only (the reader before
  // libdeflate; for comparisons). Results are identical either way. Only
  // files with size-tagged members (written by WriteNifti) use libdeflate.
  bool libdeflate = true;
};
absl::StatusOr<Volume> ReadNifti(const std::string& path, const NiftiReadOptions& options,
                                 NiftiInfo* info = nullptr);

// dim[1..dim[0]] from the header alone (no data read or decompressed beyond
// it): cheap checks at submit time. INVALID_ARGUMENT when `path` is not a
// readable NIfTI-1/-2 header or a dimension is < 1.
absl::StatusOr<std::vector<int64_t>> ReadNiftiHeaderDims(const std::string& path);

// Gzip level "auto": kNiftiImageGzipLevel for images, kNiftiFieldGzipLevel
// for vector-valued intents (displacement fields; why: nifti_io.cc).
constexpr int kNiftiGzipLevelAuto = -1;
constexpr int kNiftiImageGzipLevel = 6;  // zlib's and libdeflate's default
constexpr int kNiftiFieldGzipLevel = 1;

enum class NiftiGzipWriter {
  kLibdeflate,  // parallel independent members (common/parallel_gzip.h); levels 1..12
  kZlib,        // one zlib stream on one thread (the writer before libdeflate; for comparisons); levels 1..9
};

struct NiftiWriteOptions {
  int version = 1;          // 2 for NIfTI-2; chosen automatically when a dim > 32767
  int qform_code = 1;       // NIFTI_XFORM_SCANNER_ANAT
  int sform_code = 1;
  int intent_code = 0;
  int gzip_level = kNiftiGzipLevelAuto;  // .nii.gz only
  NiftiGzipWriter gzip_writer = NiftiGzipWriter::kLibdeflate;
  int64_t gzip_member_bytes = int64_t{4} << 20;  // uncompressed bytes per member (kLibdeflate)
};

// Writes `volume` to `path`; ".nii.gz" compresses, ".nii" does not (other
// extensions are INVALID_ARGUMENT). The array must be on the host. The file
// is written under a temporary name and renamed into place, so a failed
// write never leaves a partial file at `path`.
absl::Status WriteNifti(const Volume& volume, const std::string& path, const NiftiWriteOptions& options = {});

}  // namespace tessera

#endif  // TESSERA_COMMON_NIFTI_IO_H_
