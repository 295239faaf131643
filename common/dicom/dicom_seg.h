// Label volumes <-> DICOM Segmentation objects (Segmentation Storage,
// 1.2.840.10008.5.1.4.1.1.66.4), written with DCMTK's dcmdata.
//
// Writer: one multi-frame BINARY SEG (1 bit per pixel, frames packed back to
// back), one segment per label value present (0 = background, no segment;
// segment numbers 1..N in increasing label order), geometry exactly as
// WriteDicomSeries (dicom_writer.h: RAS -> LPS, rows flipped, the same
// k-reversal for index frames of positive determinant), so ReadDicomSeg gives
// back the labels and affine that ReadDicomSeries gives for a series written
// from the same volume. A frame is one (segment, slice) where the segment is
// present; empty frames are left out (the standard allows it), except that
// the first and the last slice each keep one frame (empty if need be) so the
// grid's extent survives the round trip. Frames are segment-major. Per frame:
// FrameContentSequence (DimensionIndexValues: segment, slice),
// PlanePositionSequence, SegmentIdentificationSequence; shared:
// PixelMeasures (with SpacingBetweenSlices), PlaneOrientation. At most
// 500,000 frames and 4 GiB of packed pixels (INVALID_ARGUMENT beyond: 131k
// frames of 128x128 take ~3 s and ~700 MiB while the object is built,
// bench/results/2026-12-06-cpu-dicom-seg.md). Each segment: category "Tissue"
// (SCT 85756007) and type "Tissue" (SCT 85756007) (a label map says nothing
// anatomical), SegmentAlgorithmType AUTOMATIC, SegmentAlgorithmName
// "Tessera", SegmentLabel from segment_names (else "label <v>").
// With a reference: patient and study copied (de-identified on request),
// FrameOfReferenceUID when same_frame_of_reference, ReferencedSeriesSequence
// naming the reference series, and per frame DerivationImageSequence /
// SourceImageSequence naming the reference slice at the same position
// (omitted where no reference slice coincides).
//
// Reader: Segmentation Storage only (others: INVALID_ARGUMENT naming the SOP
// class); BINARY and FRACTIONAL (thresholded at half the maximum fractional
// value, i.e. value * 2 >= MaximumFractionalValue); encapsulated pixel data
// is decoded by DCMTK's registered decoders or refused naming the transfer
// syntax; the grid is the frames' common orientation and pixel spacing,
// slices placed by ImagePositionPatient along the normal, the slice step
// SpacingBetweenSlices (else the smallest gap), spanning the frames present
// (slices without a frame are 0); overlapping segments: the higher segment
// number wins. INVALID_ARGUMENT naming the reason for other SOP classes,
// unreadable or truncated files, frames off one grid; NOT_FOUND for a missing
// file. The label of segment s is its label value when the SEG was
// written by us (the private attribute above), else s.
#ifndef TESSERA_COMMON_DICOM_DICOM_SEG_H_
#define TESSERA_COMMON_DICOM_DICOM_SEG_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "common/dicom/dicom_writer.h"
#include "common/volume.h"

namespace tessera::dicom {

struct DicomSegWriteOptions {
  std::string series_description;  // e.g. "tessera register: warped labels"
  // A series (dir, zip, file) the labels lie on / derive from: patient,
  // study, frame of reference, referenced instances.
  std::string reference;
  bool same_frame_of_reference = true;
  Deidentification deidentify;  // disabled by default
  std::map<int64_t, std::string> segment_names;  // label value -> name; default "label <v>"
  int series_number = 0;  // 0: the reference's + 1000, or 1
};

// One multi-frame Segmentation Storage object, BINARY, one segment per label
// value present (0 = background, not a segment). `labels`: a 3-D volume of
// integer values (any integer type, or float holding integers) in
// [0, 2^31); at most 65535 distinct non-zero values. Each segment item
// carries its label value in a private attribute (creator "TESSERA",
// (0071,xx01) LO) so ReadDicomSeg gives back the same values.
// DicomWriteResult::files holds the one file; its rescale fields are unused.
absl::StatusOr<DicomWriteResult> WriteDicomSeg(const Volume& labels, const std::string& path,
                                               const DicomSegWriteOptions& options = {});

struct DicomSegVolume {
  Volume labels;  // int32 on the SEG's grid
  std::map<int64_t, std::string> segment_names;  // label value -> SegmentLabel
  std::string series_instance_uid, frame_of_reference_uid;
};

// `max_bytes` bounds the file and the label volume it expands to (int32 per
// voxel): RESOURCE_EXHAUSTED beyond (servers pass their volume limit).
absl::StatusOr<DicomSegVolume> ReadDicomSeg(const std::string& path, int64_t max_bytes = int64_t{16} << 30);

// Whether `path` is one DICOM file of the Segmentation Storage SOP class
// (reads its meta header and top-level attributes only).
bool IsDicomSegFile(const std::string& path);

}  // namespace tessera::dicom

#endif  // TESSERA_COMMON_DICOM_DICOM_SEG_H_
