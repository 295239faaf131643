#include "common/dicom/dicom_writer.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcitem.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <errno.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/dicom/dicom_series.h"
#include "common/status.h"

namespace tessera::dicom {
namespace {

using Vec3 = std::array<double, 3>;

std::string NewUid(const char* root) {
  char buf[100];
  dcmGenerateUniqueIdentifier(buf, root);
  return buf;
}

// A DS value (at most 16 characters) and the number it denotes.
std::string Ds(double v) {
  if (v == 0) return "0";
  for (int p = 15; p >= 1; --p) {
    std::string s = absl::StrFormat("%.*g", p, v);
    if (s.size() <= 16) return s;
  }
  return "0";
}
double DsValue(double v) { return std::strtod(Ds(v).c_str(), nullptr); }

std::string Ds3(const Vec3& v) { return absl::StrCat(Ds(v[0]), "\\", Ds(v[1]), "\\", Ds(v[2])); }

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

absl::Status MakeDirs(const std::string& dir) {
  std::string partial;
  for (size_t pos = 0; pos <= dir.size(); ++pos) {
    if (pos == dir.size() || (dir[pos] == '/' && pos > 0)) {
      partial = dir.substr(0, pos);
      if (mkdir(partial.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::InternalError(absl::StrCat("cannot create directory ", partial, ": ", std::strerror(errno)));
      }
    }
  }
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::InternalError(absl::StrCat(dir, " is not a directory"));
  }
  return absl::OkStatus();
}

// Identity copied from a reference file.
const DcmTagKey kCopied[] = {DCM_PatientName,     DCM_PatientID,      DCM_PatientBirthDate, DCM_PatientSex,
                             DCM_StudyInstanceUID, DCM_StudyDate,     DCM_StudyTime,        DCM_AccessionNumber,
                             DCM_StudyID,         DCM_ReferringPhysicianName};

}  // namespace

absl::StatusOr<DicomWriteResult> WriteDicomSeries(const Volume& volume, const std::string& directory,
                                                  const DicomWriteOptions& options) {
  const NDArray& data = volume.data;
  if (data.rank() != 3) {
    return absl::InvalidArgumentError(absl::StrCat("a DICOM series holds a 3-D volume; this one is ",
                                                   ShapeToString(data.shape())));
  }
  const int nx = static_cast<int>(data.shape()[0]), ny = static_cast<int>(data.shape()[1]),
            nz = static_cast<int>(data.shape()[2]);
  if (nx <= 0 || ny <= 0 || nz <= 0 || data.raw_data() == nullptr) {
    return absl::InvalidArgumentError("empty volume");
  }
  if (nx > 65535 || ny > 65535) return absl::InvalidArgumentError("slices larger than 65535 rows or columns");
  switch (data.dtype()) {
    case DType::kUInt8: case DType::kInt8: case DType::kUInt16: case DType::kInt16:
    case DType::kInt32: case DType::kFloat32: case DType::kFloat64: break;
    default: return absl::InvalidArgumentError("unsupported voxel type for DICOM");
  }

  // Geometry: the inverse of the reader (RAS -> LPS, undo the row flip).
  const Geometry& g = volume.geometry;
  Vec3 col[3];
  for (int a = 0; a < 3; ++a) {
    for (int q = 0; q < 3; ++q) col[a][q] = g.direction[q * 3 + a];
    const double n = std::sqrt(col[a][0] * col[a][0] + col[a][1] * col[a][1] + col[a][2] * col[a][2]);
    if (!(std::abs(n - 1) < 1e-4) || !(g.spacing[a] > 0) || !std::isfinite(g.spacing[a])) {
      return absl::InvalidArgumentError("direction cosines or spacing are not valid (unit columns, positive spacing)");
    }
  }
  for (int a = 0; a < 3; ++a) {
    for (int b = a + 1; b < 3; ++b) {
      const double d = col[a][0] * col[b][0] + col[a][1] * col[b][1] + col[a][2] * col[b][2];
      if (std::abs(d) > 1e-4) {
        return absl::InvalidArgumentError(
            absl::StrFormat("direction cosines are not orthonormal (axes %d and %d: cos = %.6g); DICOM slices "
                            "need orthogonal row, column and slice directions",
                            a, b, d));
      }
    }
  }
  for (int q = 0; q < 3; ++q) {
    if (!std::isfinite(g.origin[q])) return absl::InvalidArgumentError("non-finite origin");
  }
  auto lps = [](Vec3 v) { return Vec3{-v[0], -v[1], v[2]}; };
  const Vec3 r = lps(col[0]);                          // row direction (i)
  const Vec3 c = lps({-col[1][0], -col[1][1], -col[1][2]});  // column direction (DICOM rows go -j)
  const Vec3 step = lps({col[2][0] * g.spacing[2], col[2][1] * g.spacing[2], col[2][2] * g.spacing[2]});
  Vec3 ipp0;
  for (int q = 0; q < 3; ++q) ipp0[q] = g.origin[q] + (ny - 1) * col[1][q] * g.spacing[1];
  ipp0 = lps(ipp0);

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
  std::unique_ptr<DcmFileFormat> ref;
  std::string ref_series_uid, ref_modality, ref_sop_class, ref_sop_instance, ref_patient_position,
      ref_laterality;
  int ref_series_number = 0;
  if (!options.reference.empty()) {
    TESSERA_ASSIGN_OR_RETURN(DicomSeries rs, ReadDicomSeries({options.reference}));
    const std::string& first = rs.info.files.front();
    if (first.find('!') != std::string::npos) {
      return absl::InvalidArgumentError("a reference series in a zip archive is not supported; extract it first");
    }
    ref = std::make_unique<DcmFileFormat>();
    const OFCondition st = ref->loadFile(first.c_str());
    if (st.bad()) return absl::InvalidArgumentError(absl::StrCat("cannot read reference ", first, ": ", st.text()));
    ref_series_uid = rs.info.series_instance_uid;
    ref_modality = rs.info.modality;
    ref_series_number = rs.info.series_number;
    OFString s;
    if (ref->getDataset()->findAndGetOFString(DCM_SOPClassUID, s).good()) ref_sop_class = s.c_str();
    if (ref->getDataset()->findAndGetOFString(DCM_SOPInstanceUID, s).good()) ref_sop_instance = s.c_str();
    if (ref->getDataset()->findAndGetOFString(DCM_PatientPosition, s).good()) ref_patient_position = s.c_str();
    if (ref->getDataset()->findAndGetOFString(DCM_Laterality, s).good()) ref_laterality = s.c_str();
  }
  const bool ct = ref_modality == "CT";
  result.sop_class_uid = ct ? UID_CTImageStorage : UID_SecondaryCaptureImageStorage;
  std::string study_uid = NewUid(SITE_STUDY_UID_ROOT);
  if (ref) {
    OFString s;
    if (ref->getDataset()->findAndGetOFString(DCM_StudyInstanceUID, s).good() && !s.empty()) study_uid = s.c_str();
  }
  std::string for_uid = NewUid(SITE_UID_ROOT);
  if (ref && options.same_frame_of_reference) {
    OFString s;
    if (ref->getDataset()->findAndGetOFString(DCM_FrameOfReferenceUID, s).good() && !s.empty()) for_uid = s.c_str();
  }
  result.study_instance_uid = study_uid;
  result.series_instance_uid = NewUid(SITE_SERIES_UID_ROOT);
  const int series_number = options.series_number > 0 ? options.series_number
                            : ref                     ? ref_series_number + 1000
                                                      : 1;

  TESSERA_RETURN_IF_ERROR(MakeDirs(directory));
  const std::string iop = absl::StrCat(Ds3(r), "\\", Ds3(c));
  const std::string spacing = absl::StrCat(Ds(g.spacing[1]), "\\", Ds(g.spacing[0]));
  const std::string thickness = Ds(g.spacing[2]);
  std::vector<uint16_t> pixels(static_cast<size_t>(nx) * ny);
  double max_err = 0;
  for (int k = 0; k < nz; ++k) {
    DcmFileFormat file;
    DcmDataset* ds = file.getDataset();
    const std::string sop_uid = NewUid(SITE_INSTANCE_UID_ROOT);
    auto put = [&](const DcmTagKey& key, const std::string& v) { ds->putAndInsertString(key, v.c_str()); };
    put(DCM_SpecificCharacterSet, "ISO_IR 192");
    put(DCM_ImageType, ct ? "DERIVED\\SECONDARY\\AXIAL" : "DERIVED\\SECONDARY");
    put(DCM_SOPClassUID, result.sop_class_uid);
    put(DCM_SOPInstanceUID, sop_uid);
    for (const DcmTagKey& key : kCopied) put(key, "");
    if (ref) {
      for (const DcmTagKey& key : kCopied) {
        OFString s;
        if (ref->getDataset()->findAndGetOFStringArray(key, s).good()) put(key, s.c_str());
      }
    } else {
      put(DCM_StudyInstanceUID, study_uid);
    }
    put(DCM_StudyInstanceUID, study_uid);
    put(DCM_Modality, ref_modality.empty() ? "OT" : ref_modality);
    if (!ct) put(DCM_ConversionType, "WSD");
    put(DCM_Manufacturer, "");
    put(DCM_SeriesInstanceUID, result.series_instance_uid);
    put(DCM_SeriesNumber, absl::StrCat(series_number));
    put(DCM_SeriesDescription, options.series_description);
    put(DCM_InstanceNumber, absl::StrCat(k + 1));
    put(DCM_PatientOrientation, "");
    put(DCM_Laterality, ref_laterality);  // the same body part as the reference (empty: unknown)
    if (ct) put(DCM_PatientPosition, ref_patient_position);
    put(DCM_FrameOfReferenceUID, for_uid);
    put(DCM_PositionReferenceIndicator, "");
    Vec3 ipp;
    for (int q = 0; q < 3; ++q) ipp[q] = ipp0[q] + k * step[q];
    put(DCM_ImagePositionPatient, Ds3(ipp));
    put(DCM_ImageOrientationPatient, iop);
    put(DCM_PixelSpacing, spacing);
    put(DCM_SliceThickness, thickness);
    put(DCM_SpacingBetweenSlices, thickness);
    put(DCM_SliceLocation, Ds(ipp[0] * (r[1] * c[2] - r[2] * c[1]) + ipp[1] * (r[2] * c[0] - r[0] * c[2]) +
                              ipp[2] * (r[0] * c[1] - r[1] * c[0])));
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
