// What WriteDicomSeries (dicom_writer.cc) and WriteDicomSeg (dicom_seg.cc)
// share: DS formatting, the slice layout of a volume (the inverse of
// ReadDicomSeries' geometry), the reference series, and the patient / study
// identity copied from it (de-identified on request: dicom_writer.h).
// Internal to common/dicom.
#ifndef TESSERA_COMMON_DICOM_DICOM_WRITE_COMMON_H_
#define TESSERA_COMMON_DICOM_DICOM_WRITE_COMMON_H_

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcitem.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dicom/dicom_series.h"
#include "common/dicom/dicom_writer.h"
#include "common/volume.h"

namespace tessera::dicom::internal {

using Vec3 = std::array<double, 3>;

// A DS value (at most 16 characters), the number it denotes, three of them.
std::string Ds(double v);
double DsValue(double v);
std::string Ds3(const Vec3& v);

absl::Status MakeDirs(const std::string& dir);

// Where DICOM puts the slices of a volume: i along a row, DICOM rows run
// toward -j (dcm2niix's row flip undone), one slice per k; LPS.
struct SliceLayout {
  int nx = 0, ny = 0, nz = 0;
  Vec3 row{}, col{}, step{}, first{};  // row (i), column, slice step (k), ImagePositionPatient of slice 0
  std::string orientation;    // ImageOrientationPatient
  std::string pixel_spacing;  // PixelSpacing: between rows \ between columns
  std::string thickness;      // |k step|: SliceThickness and SpacingBetweenSlices
  Vec3 Position(int k) const;
  double SliceLocation(const Vec3& ipp) const;  // along row x column
};
// INVALID_ARGUMENT for what DICOM slices cannot hold (see dicom_writer.h).
absl::StatusOr<SliceLayout> LayoutSlices(const Volume& volume);

// The reference series of an output.
struct Reference {
  std::unique_ptr<DcmFileFormat> first;  // its first file in slice order
  DicomSeriesInfo info;
  Geometry geometry;  // as ReadDicomSeries gives it
  int nz = 0;
  std::string sop_class, sop_instance;  // of the first file
  std::string patient_position, laterality;
  // SOPInstanceUID of slice k (one file per slice); empty for a multi-frame
  // reference (its frames are not named one by one).
  std::vector<std::string> slice_instances;
};
absl::StatusOr<std::unique_ptr<Reference>> LoadReference(const std::string& path);

// The reference slice lying in the plane of `geometry`'s slice k (same
// normal, within 0.01 mm), or -1.
int CoincidingReferenceSlice(const Reference& ref, const Geometry& geometry, int k);

// A UID copied from the reference, keyed-hashed when de-identifying.
std::string CopiedUid(const Deidentification& deidentify, const std::string& uid);
// A new UID (series, instance, a new study or frame of reference); opaque
// (a keyed hash of a fresh one) when de-identifying.
std::string NewUid(const char* root, const Deidentification& deidentify);

// Patient and General Study attributes: the reference's (PatientName,
// PatientID, PatientBirthDate, PatientSex, StudyDate, StudyTime,
// AccessionNumber, StudyID, ReferringPhysicianName), or empty ones without a
// reference; with de-identification the pseudonym and empty values, and the
// profile's marks (PatientIdentityRemoved, DeidentificationMethod[CodeSequence],
// LongitudinalTemporalInformationModified). StudyInstanceUID = `study_uid`.
void PutPatientAndStudy(DcmItem* ds, const Reference* ref, const Deidentification& deidentify,
                        const std::string& study_uid);

// The output's StudyInstanceUID and FrameOfReferenceUID (the reference's,
// keyed-hashed when de-identifying, or new).
std::string StudyUidFor(const Reference* ref, const Deidentification& deidentify);
std::string FrameOfReferenceUidFor(const Reference* ref, bool same_frame_of_reference,
                                   const Deidentification& deidentify);

}  // namespace tessera::dicom::internal

#endif  // TESSERA_COMMON_DICOM_DICOM_WRITE_COMMON_H_
