// DICOM series -> Volume (DCMTK), with the geometry dcm2niix gives the same
// series, so a DICOM input is interchangeable with dcm2niix's NIfTI.
//
// Inputs: a directory (its regular files, not recursive; files without the
// "DICM" preamble are skipped), a zip archive (its members, the same rule),
// or a list of files (each must be DICOM). Files are grouped by
// SeriesInstanceUID; several series without DicomReadOptions::series are
// INVALID_ARGUMENT listing each (index, UID, description, modality, files).
//
// Geometry (dcm2niix's convention, checked against Debian's dcm2niix in
// dcm2niix_compare_test):
//   - i runs along a row (ImageOrientationPatient's first vector r, step
//     PixelSpacing[1]), j along a column (second vector c, step
//     PixelSpacing[0]), k across slices sorted by the projection of
//     ImagePositionPatient on n = r x c, ascending;
//   - the slice step is (IPP_last - IPP_first) / (N - 1) (positions, not
//     SliceThickness; one slice: n * SpacingBetweenSlices or SliceThickness);
//   - LPS is converted to RAS (x and y negated), then the rows are flipped
//     (dcm2niix's default): j = 0 is the last DICOM row.
// Multi-frame (Enhanced CT/MR and other functional-group objects): each
// frame's PlanePositionSequence / PlaneOrientationSequence /
// PixelMeasuresSequence / PixelValueTransformationSequence from the
// per-frame groups, else the shared groups, else the top-level attributes.
//
// Values: RescaleSlope/RescaleIntercept are applied. Stored type: the stored
// integer type when every frame's rescale is the identity; int16 (else int32)
// when the slopes are 1 and the intercepts integral; float32 otherwise.
//
// Refusals (INVALID_ARGUMENT naming the reason): gantry tilt / a slice
// direction not along the normal (the angle), uneven spacing (the spacings),
// missing slices (where), duplicate positions, several orientations,
// inconsistent dimensions or pixel spacing, colour images, missing pixel data,
// and files DCMTK cannot parse or decode (naming the file).
#ifndef TESSERA_COMMON_DICOM_DICOM_SERIES_H_
#define TESSERA_COMMON_DICOM_DICOM_SERIES_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/volume.h"

namespace tessera::dicom {

struct DicomReadOptions {
  // Which series of a mixed set: a SeriesInstanceUID, or a 1-based index into
  // the list the refusal prints (series ordered by SeriesNumber, then UID).
  std::string series;
  // false: keep DICOM's row order (no dcm2niix row flip).
  bool flip_rows = true;
  // Bytes of files (and of zip members, uncompressed) read at most:
  // RESOURCE_EXHAUSTED beyond (servers pass a bound from their volume limit).
  int64_t max_bytes = int64_t{16} << 30;
};

struct DicomSeriesInfo {
  std::string modality;
  std::string patient_id;
  std::string study_instance_uid;
  std::string series_instance_uid;
  std::string series_description;
  int series_number = 0;
  int num_files = 0;    // files of the series
  int num_frames = 0;   // slices (frames) read
  std::string transfer_syntax;  // of the first file, e.g. "1.2.840.10008.1.2.1"
  std::vector<std::string> files;  // in slice order (a zip member as "zip!name")
};

struct DicomSeries {
  Volume volume;
  DicomSeriesInfo info;
};

// `inputs`: one directory, one zip, or one or more files.
absl::StatusOr<DicomSeries> ReadDicomSeries(const std::vector<std::string>& inputs,
                                            const DicomReadOptions& options = {});

// Registers DCMTK's decoders (JPEG, JPEG-LS, RLE) and quiets its log, once
// per process; every reader of DICOM pixel data calls it first.
void InitDcmtkOnce();

// A path a DICOM reader should handle: a directory, a zip archive, or a file
// with the DICOM preamble ("DICM" at byte 128). Cheap (reads 132 bytes).
bool IsDicomPath(const std::string& path);

// The RAS index -> world affine of a DICOM slice stack, as dcm2niix defines
// it: LPS mm vectors along a row (i: ImageOrientationPatient's row cosine
// times the column spacing), down the columns (j) and between slices (k),
// and the first slice's ImagePositionPatient; x and y negated (LPS -> RAS);
// with flip_rows, j reversed (the origin moves to the last row). Shared by
// the series and SEG readers so both place voxels identically.
Mat4 DicomStackAffine(std::array<double, 3> along_row, std::array<double, 3> down_column,
                      std::array<double, 3> slice_step, std::array<double, 3> first_position, int64_t rows,
                      bool flip_rows);

// The Modality of a series directory's first DICOM file (by name) or of one
// DICOM file, from its header alone (pixel data is not read); "" for a zip,
// a path without DICOM files, or a file without the attribute. For choices
// that depend on what an input is (e.g. whether a resampled image holds CT
// numbers), never for refusals.
std::string PeekDicomModality(const std::string& path);

}  // namespace tessera::dicom

#endif  // TESSERA_COMMON_DICOM_DICOM_SERIES_H_
