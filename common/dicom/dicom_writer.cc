#include "common/dicom/dicom_writer.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcitem.h>
#include <dcmtk/dcmdata/dcuid.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/dicom/deidentify.h"
#include "common/dicom/dicom_write_common.h"
#include "common/status.h"

namespace tessera::dicom {
namespace {

using internal::Ds;
using internal::Ds3;
using internal::DsValue;
using internal::Vec3;

double ValueAt(const NDArray& a, int64_t i) {
  switch (a.dtype()) {
    case DType::kUInt8: return a.data<uint8_t>()[i];
    case DType::kInt8: return a.data<int8_t>()[i];
    case DType::kUInt16: return a.data<uint16_t>()[i];
    case DType::kInt16: return a.data<int16_t>()[i];
    case DType::kInt32: return a.data<int32_t>()[i];
    case DType::kFloat32: return a.data<float>()[i];
    case DType::kFloat64: return a.data<double>()[i];
    default: return NAN;
  }
}

}  // namespace

absl::StatusOr<DicomWriteResult> WriteDicomSeries(const Volume& volume, const std::string& directory,
                                                  const DicomWriteOptions& options) {
  const NDArray& data = volume.data;
  TESSERA_ASSIGN_OR_RETURN(const internal::SliceLayout layout, internal::LayoutSlices(volume));
  TESSERA_RETURN_IF_ERROR(CheckDeidentification(options.deidentify));
  const int nx = layout.nx, ny = layout.ny, nz = layout.nz;
  switch (data.dtype()) {
    case DType::kUInt8: case DType::kInt8: case DType::kUInt16: case DType::kInt16:
    case DType::kInt32: case DType::kFloat32: case DType::kFloat64: break;
    default: return absl::InvalidArgumentError("unsupported voxel type for DICOM");
  }
  const Deidentification& deid = options.deidentify;

  // Values: exact when integral within a 16-bit window, else linear uint16.
  const int64_t n = NumElements(data.shape());
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  bool integral = true;
  for (int64_t i = 0; i < n; ++i) {
    const double v = ValueAt(data, i);
    if (!std::isfinite(v)) return absl::InvalidArgumentError("the volume has non-finite values");
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    if (integral && v != std::floor(v)) integral = false;
  }
  DicomWriteResult result;
  bool is_signed = true;
  double slope = 1, intercept = 0;
  if (integral && lo >= -32768 && hi <= 32767) {
    is_signed = true;
  } else if (integral && lo >= 0 && hi <= 65535) {
    is_signed = false;
  } else if (integral && hi - lo <= 65535) {
    is_signed = false;
    intercept = lo;
  } else {
    is_signed = false;
    slope = DsValue(hi > lo ? (hi - lo) / 65535.0 : 1.0);
    intercept = DsValue(lo);
    // The DS rounding of the slope may shrink the range: widen slightly.
    while (intercept + 65535.0 * slope < hi) slope = DsValue(slope * (1 + 1e-9));
  }
  result.rescale_slope = slope;
  result.rescale_intercept = intercept;

  // Reference identity.
  std::unique_ptr<internal::Reference> ref;
  if (!options.reference.empty()) {
    TESSERA_ASSIGN_OR_RETURN(ref, internal::LoadReference(options.reference));
  }
  // CT Image Storage claims HU (RescaleType): only when the caller says so.
  const bool ct = ref && ref->info.modality == "CT" && options.values_are_hounsfield;
  result.sop_class_uid = ct ? UID_CTImageStorage : UID_SecondaryCaptureImageStorage;
  const std::string study_uid = internal::StudyUidFor(ref.get(), deid);
  const std::string for_uid = internal::FrameOfReferenceUidFor(ref.get(), options.same_frame_of_reference, deid);
  result.study_instance_uid = study_uid;
  result.series_instance_uid = internal::NewUid(SITE_SERIES_UID_ROOT, deid);
  const int series_number = options.series_number > 0 ? options.series_number
                            : ref                     ? ref->info.series_number + 1000
                                                      : 1;
  const std::string ref_modality = ref ? ref->info.modality : "";
  const std::string ref_sop_class = ref ? ref->sop_class : "";
  const std::string ref_sop_instance = ref ? internal::CopiedUid(deid, ref->sop_instance) : "";
  const std::string ref_series_uid = ref ? internal::CopiedUid(deid, ref->info.series_instance_uid) : "";

  TESSERA_RETURN_IF_ERROR(internal::MakeDirs(directory));
  const std::string& iop = layout.orientation;
  const std::string& spacing = layout.pixel_spacing;
  const std::string& thickness = layout.thickness;
  std::vector<uint16_t> pixels(static_cast<size_t>(nx) * ny);
  double max_err = 0;
  for (int k = 0; k < nz; ++k) {
    DcmFileFormat file;
    DcmDataset* ds = file.getDataset();
    const std::string sop_uid = internal::NewUid(SITE_INSTANCE_UID_ROOT, deid);
    auto put = [&](const DcmTagKey& key, const std::string& v) { ds->putAndInsertString(key, v.c_str()); };
    put(DCM_SpecificCharacterSet, "ISO_IR 192");
    put(DCM_ImageType, ct ? "DERIVED\\SECONDARY\\AXIAL" : "DERIVED\\SECONDARY");
    put(DCM_SOPClassUID, result.sop_class_uid);
    put(DCM_SOPInstanceUID, sop_uid);
    internal::PutPatientAndStudy(ds, ref.get(), deid, study_uid);
    put(DCM_Modality, ref_modality.empty() ? "OT" : ref_modality);
    if (!ct) put(DCM_ConversionType, "WSD");
    put(DCM_Manufacturer, "");
    put(DCM_SeriesInstanceUID, result.series_instance_uid);
    put(DCM_SeriesNumber, absl::StrCat(series_number));
    put(DCM_SeriesDescription, options.series_description);
    put(DCM_InstanceNumber, absl::StrCat(k + 1));
    put(DCM_PatientOrientation, "");
    put(DCM_Laterality, ref ? ref->laterality : "");  // the same body part as the reference (empty: unknown)
    if (ct) put(DCM_PatientPosition, ref->patient_position);
    put(DCM_FrameOfReferenceUID, for_uid);
    put(DCM_PositionReferenceIndicator, "");
    const Vec3 ipp = layout.Position(k);
    put(DCM_ImagePositionPatient, Ds3(ipp));
    put(DCM_ImageOrientationPatient, iop);
    put(DCM_PixelSpacing, spacing);
    put(DCM_SliceThickness, thickness);
    put(DCM_SpacingBetweenSlices, thickness);
    put(DCM_SliceLocation, Ds(layout.SliceLocation(ipp)));
    if (ct) {
      put(DCM_KVP, "");
      put(DCM_AcquisitionNumber, "");
      put(DCM_RescaleType, "HU");
    } else {
      put(DCM_RescaleType, "US");  // unspecified
    }
    ds->putAndInsertUint16(DCM_SamplesPerPixel, 1);
    put(DCM_PhotometricInterpretation, "MONOCHROME2");
    ds->putAndInsertUint16(DCM_Rows, static_cast<Uint16>(ny));
    ds->putAndInsertUint16(DCM_Columns, static_cast<Uint16>(nx));
    ds->putAndInsertUint16(DCM_BitsAllocated, 16);
    ds->putAndInsertUint16(DCM_BitsStored, 16);
    ds->putAndInsertUint16(DCM_HighBit, 15);
    ds->putAndInsertUint16(DCM_PixelRepresentation, is_signed ? 1 : 0);
    put(DCM_RescaleIntercept, Ds(intercept));
    put(DCM_RescaleSlope, Ds(slope));
    if (ref && !ref_sop_instance.empty()) {
      // Derived from the reference: SourceImageSequence names its first
      // instance, and the Common Instance Reference module its series.
      DcmItem* src = nullptr;
      if (ds->findOrCreateSequenceItem(DCM_SourceImageSequence, src, -2).good() && src) {
        src->putAndInsertString(DCM_ReferencedSOPClassUID, ref_sop_class.c_str());
        src->putAndInsertString(DCM_ReferencedSOPInstanceUID, ref_sop_instance.c_str());
      }
      if (!options.series_description.empty()) put(DCM_DerivationDescription, options.series_description);
    }
    if (ref && !ref_series_uid.empty()) {
      DcmItem* item = nullptr;
      if (ds->findOrCreateSequenceItem(DCM_ReferencedSeriesSequence, item, -2).good() && item) {
        item->putAndInsertString(DCM_SeriesInstanceUID, ref_series_uid.c_str());
        DcmItem* inst = nullptr;
        if (!ref_sop_instance.empty() &&
            item->findOrCreateSequenceItem(DCM_ReferencedInstanceSequence, inst, -2).good() && inst) {
          inst->putAndInsertString(DCM_ReferencedSOPClassUID, ref_sop_class.c_str());
          inst->putAndInsertString(DCM_ReferencedSOPInstanceUID, ref_sop_instance.c_str());
        }
      }
    }
    // Pixels: DICOM row y holds j = ny - 1 - y.
    double wmin = 1e300, wmax = -1e300;
    for (int y = 0; y < ny; ++y) {
      const int j = ny - 1 - y;
      const int64_t in_row = static_cast<int64_t>(nx) * (j + static_cast<int64_t>(ny) * k);
      for (int x = 0; x < nx; ++x) {
        const double v = ValueAt(data, in_row + x);
        double s = std::nearbyint((v - intercept) / slope);
        s = is_signed ? std::clamp(s, -32768.0, 32767.0) : std::clamp(s, 0.0, 65535.0);
        max_err = std::max(max_err, std::abs(s * slope + intercept - v));
        wmin = std::min(wmin, s);
        wmax = std::max(wmax, s);
        pixels[static_cast<size_t>(nx) * y + x] =
            is_signed ? static_cast<uint16_t>(static_cast<int16_t>(s)) : static_cast<uint16_t>(s);
      }
    }
    const double center = (wmin + wmax) / 2 * slope + intercept, width = std::max(1.0, (wmax - wmin + 1) * slope);
    put(DCM_WindowCenter, Ds(center));
    put(DCM_WindowWidth, Ds(width));
    ds->putAndInsertUint16Array(DCM_PixelData, pixels.data(), static_cast<unsigned long>(pixels.size()));
    const std::string path = absl::StrFormat("%s/IM%05d.dcm", directory, k + 1);
    const OFCondition st = file.saveFile(path.c_str(), EXS_LittleEndianExplicit);
    if (st.bad()) return absl::InternalError(absl::StrCat("cannot write ", path, ": ", st.text()));
    result.files.push_back(path);
  }
  result.max_abs_error = max_err;
  return result;
}

}  // namespace tessera::dicom
