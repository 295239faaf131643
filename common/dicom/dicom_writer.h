// Volume -> a derived single-frame DICOM series (DCMTK), one file per slice,
// the inverse of ReadDicomSeries' geometry: ReadDicomSeries(written) gives
// back the same voxels and affine (see "Handedness" for the one exception).
//
// SOP class: CT Image Storage when the reference series is CT and the caller
// states that the values are CT numbers (DicomWriteOptions::
// values_are_hounsfield: a CT resampled or converted; the derived image stays
// a CT for viewers and hanging protocols; the CT Image module's Type 1
// attributes we can state truthfully are written: ImageType
// DERIVED\SECONDARY, RescaleType HU); Secondary Capture Image Storage
// otherwise (no reference, MR, PET, a reconstruction's attenuation in 1/mm,
// an MR image resampled onto a CT, ...): SC has no acquisition attributes to
// invent (the MR IOD would need ScanningSequence etc., which a result does
// not have), and ImagePositionPatient / ImageOrientationPatient /
// PixelSpacing are still written so that readers (ours, dcm2niix) place it.
//
// Geometry from the RAS affine: i -> along a row (ImageOrientationPatient's
// first vector, PixelSpacing[1]), j -> rows in reverse (dcm2niix's row flip),
// k -> one file per slice, ImagePositionPatient of each; SliceThickness and
// SpacingBetweenSlices = |k step|. Handedness: the reader sorts slices along
// row x column; a volume whose k step points the other way (an index frame
// of positive determinant, e.g. a RAS NIfTI: every DICOM series reads back
// with a negative one, as with dcm2niix) is written as is and reads back with
// k reversed: the same image in space, the k column negated and the origin at
// the last slice.
//
// Values: int8/uint8/int16/uint16 volumes are stored exactly (16 bits, slope
// 1, intercept 0); int32 and float volumes whose values are integers within a
// 16-bit range are stored exactly (intercept shifts a 65535-wide range);
// other volumes are quantized linearly to uint16 over [min, max]: the error
// is at most RescaleSlope / 2 = (max - min) / 131070 (plus float rounding),
// reported in DicomWriteResult::max_abs_error.
//
// Reference series (DicomWriteOptions::reference): patient and study identity
// (PatientName, PatientID, PatientBirthDate, PatientSex, StudyInstanceUID,
// StudyDate, StudyTime, AccessionNumber, StudyID, ReferringPhysicianName),
// FrameOfReferenceUID when same_frame_of_reference, Modality, Laterality,
// PatientPosition (CT), SourceImageSequence (its first instance) and a
// ReferencedSeriesSequence item naming the reference series. Without one: a
// new study, anonymous patient fields (empty Type 2 attributes).
// New SeriesInstanceUID / SOPInstanceUIDs always (and a new study without a
// reference), from DCMTK's dcmGenerateUniqueIdentifier (keyed-hashed too when
// de-identifying). DicomWriteOptions::deidentify: see Deidentification.
//
// Errors: INVALID_ARGUMENT for empty, 4-D / multi-component volumes,
// non-orthonormal direction cosines, non-finite values; the reference's read
// errors; INTERNAL naming the path when a directory or file cannot be written.
#ifndef TESSERA_COMMON_DICOM_DICOM_WRITER_H_
#define TESSERA_COMMON_DICOM_DICOM_WRITER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/volume.h"

namespace tessera::dicom {

// The DICOM Basic Application Level Confidentiality Profile (PS3.15 Annex E)
// applied to what the writers copy from a reference series, and to what they
// write themselves: PatientName / PatientID become a pseudonym ("ANON-" + 8
// hex of HMAC-SHA-256(salt, PatientID)); PatientBirthDate / PatientSex /
// PatientAge, StudyDate / StudyTime, AccessionNumber, StudyID,
// ReferringPhysicianName, InstitutionName are emptied (Type 2) or left out;
// every UID copied (Study, FrameOfReference, referenced series and instances)
// becomes "2.25." + the first 128 bits of HMAC-SHA-256(salt, uid) as a
// decimal; PatientIdentityRemoved YES, DeidentificationMethod and
// DeidentificationMethodCodeSequence (113100, DCM, "Basic Application
// Confidentiality Profile"); dates are not kept (no 113107). The
// DerivationDescription is the series description only (never a path).
struct Deidentification {
  bool enabled = false;
  // Secret per job (random, from the caller): new UIDs are a keyed hash of
  // the original ones, so several outputs of one job (a series and a SEG)
  // still refer to one new study and frame of reference, and nobody without
  // the salt can map them back. Required (non-empty) when enabled.
  std::string salt;
};

struct DicomWriteOptions {
  std::string series_description;  // what made it, e.g. "tessera register (warped)"
  // A series (directory, zip or file) whose patient and study the output keeps.
  std::string reference;
  // Copy the reference's FrameOfReferenceUID (the volume is in the
  // reference's patient space, e.g. resampled onto it); else a new one.
  bool same_frame_of_reference = true;
  int series_number = 0;  // 0: the reference's + 1000, or 1
  Deidentification deidentify;  // disabled by default
  // The values are CT numbers in HU (a CT resampled or converted): with a CT
  // reference the series is CT Image Storage, RescaleType HU. False (values
  // in other units, e.g. a CT reconstruction's attenuation in 1/mm, or
  // another modality's intensities): Secondary Capture, RescaleType US.
  bool values_are_hounsfield = false;
};

struct DicomWriteResult {
  std::vector<std::string> files;  // in slice order
  std::string study_instance_uid;
  std::string series_instance_uid;
  std::string sop_class_uid;
  double rescale_slope = 1, rescale_intercept = 0;
  double max_abs_error = 0;  // largest |stored * slope + intercept - value|
};

// Writes into `directory` (created when missing; existing files of the same
// names, "IM%05d.dcm", are replaced).
absl::StatusOr<DicomWriteResult> WriteDicomSeries(const Volume& volume, const std::string& directory,
                                                  const DicomWriteOptions& options = {});

}  // namespace tessera::dicom

#endif  // TESSERA_COMMON_DICOM_DICOM_WRITER_H_
