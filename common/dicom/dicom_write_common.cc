#include "common/dicom/dicom_write_common.h"

#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <errno.h>
#include <sys/stat.h>

#include <cmath>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/dicom/deidentify.h"
#include "common/status.h"

namespace tessera::dicom::internal {
namespace {

double Dot(const Vec3& a, const Vec3& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
Vec3 Cross(const Vec3& a, const Vec3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
Vec3 Column(const Geometry& g, int a) { return {g.direction[a], g.direction[3 + a], g.direction[6 + a]}; }

std::string GetString(DcmItem* item, const DcmTagKey& key) {
  OFString s;
  if (item != nullptr && item->findAndGetOFStringArray(key, s).good()) return s.c_str();
  return "";
}

}  // namespace

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

Vec3 SliceLayout::Position(int k) const {
  return {first[0] + k * step[0], first[1] + k * step[1], first[2] + k * step[2]};
}

double SliceLayout::SliceLocation(const Vec3& ipp) const { return Dot(ipp, Cross(row, col)); }

absl::StatusOr<SliceLayout> LayoutSlices(const Volume& volume) {
  const NDArray& data = volume.data;
  if (data.rank() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("a DICOM series holds a 3-D volume; this one is ", ShapeToString(data.shape())));
  }
  SliceLayout out;
  out.nx = static_cast<int>(data.shape()[0]);
  out.ny = static_cast<int>(data.shape()[1]);
  out.nz = static_cast<int>(data.shape()[2]);
  if (out.nx <= 0 || out.ny <= 0 || out.nz <= 0 || data.raw_data() == nullptr) {
    return absl::InvalidArgumentError("empty volume");
  }
  if (out.nx > 65535 || out.ny > 65535) return absl::InvalidArgumentError("slices larger than 65535 rows or columns");
  const Geometry& g = volume.geometry;
  Vec3 col[3];
  for (int a = 0; a < 3; ++a) {
    col[a] = Column(g, a);
    const double n = std::sqrt(Dot(col[a], col[a]));
    if (!(std::abs(n - 1) < 1e-4) || !(g.spacing[a] > 0) || !std::isfinite(g.spacing[a])) {
      return absl::InvalidArgumentError("direction cosines or spacing are not valid (unit columns, positive spacing)");
    }
  }
  for (int a = 0; a < 3; ++a) {
    for (int b = a + 1; b < 3; ++b) {
      const double d = Dot(col[a], col[b]);
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
  out.row = lps(col[0]);
  out.col = lps({-col[1][0], -col[1][1], -col[1][2]});  // DICOM rows go -j
  out.step = lps({col[2][0] * g.spacing[2], col[2][1] * g.spacing[2], col[2][2] * g.spacing[2]});
  Vec3 ipp0;
  for (int q = 0; q < 3; ++q) ipp0[q] = g.origin[q] + (out.ny - 1) * col[1][q] * g.spacing[1];
  out.first = lps(ipp0);
  out.orientation = absl::StrCat(Ds3(out.row), "\\", Ds3(out.col));
  out.pixel_spacing = absl::StrCat(Ds(g.spacing[1]), "\\", Ds(g.spacing[0]));
  out.thickness = Ds(g.spacing[2]);
  return out;
}

absl::StatusOr<std::unique_ptr<Reference>> LoadReference(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(DicomSeries rs, ReadDicomSeries({path}));
  const std::string& first = rs.info.files.front();
  if (first.find('!') != std::string::npos) {
    return absl::InvalidArgumentError("a reference series in a zip archive is not supported; extract it first");
  }
  auto ref = std::make_unique<Reference>();
  ref->first = std::make_unique<DcmFileFormat>();
  const OFCondition st = ref->first->loadFile(first.c_str());
  if (st.bad()) return absl::InvalidArgumentError(absl::StrCat("cannot read reference ", first, ": ", st.text()));
  DcmDataset* ds = ref->first->getDataset();
  ref->sop_class = GetString(ds, DCM_SOPClassUID);
  ref->sop_instance = GetString(ds, DCM_SOPInstanceUID);
  ref->patient_position = GetString(ds, DCM_PatientPosition);
  ref->laterality = GetString(ds, DCM_Laterality);
  ref->geometry = rs.volume.geometry;
  ref->nz = static_cast<int>(rs.volume.data.shape()[2]);
  if (static_cast<int>(rs.info.files.size()) == ref->nz) {
    for (const std::string& file : rs.info.files) {
      DcmFileFormat f;
      // Only the header: elements longer than 256 bytes (pixels) stay on disk.
      if (f.loadFile(file.c_str(), EXS_Unknown, EGL_noChange, 256).bad()) {
        return absl::InvalidArgumentError(absl::StrCat("cannot read reference ", file));
      }
      ref->slice_instances.push_back(GetString(f.getDataset(), DCM_SOPInstanceUID));
    }
  }
  ref->info = std::move(rs.info);
  return ref;
}

int CoincidingReferenceSlice(const Reference& ref, const Geometry& geometry, int k) {
  const Vec3 n_ref = Column(ref.geometry, 2), n = Column(geometry, 2);
  const Vec3 x = Cross(n_ref, n);
  if (std::sqrt(Dot(x, x)) > 1e-4) return -1;
  Vec3 rel;
  for (int q = 0; q < 3; ++q) rel[q] = geometry.origin[q] + k * geometry.spacing[2] * n[q] - ref.geometry.origin[q];
  const double d = Dot(rel, n_ref) / ref.geometry.spacing[2];
  const double kk = std::round(d);
  if (std::abs(d - kk) * ref.geometry.spacing[2] > 0.01 || kk < 0 || kk >= ref.nz) return -1;
  return static_cast<int>(kk);
}

std::string CopiedUid(const Deidentification& deidentify, const std::string& uid) {
  return deidentify.enabled && !uid.empty() ? DeidentifiedUid(deidentify.salt, uid) : uid;
}

std::string NewUid(const char* root, const Deidentification& deidentify) {
  char buf[100];
  dcmGenerateUniqueIdentifier(buf, root);
  return deidentify.enabled ? DeidentifiedUid(deidentify.salt, buf) : std::string(buf);
}

void PutPatientAndStudy(DcmItem* ds, const Reference* ref, const Deidentification& deidentify,
                        const std::string& study_uid) {
  static const DcmTagKey kCopied[] = {DCM_PatientName,     DCM_PatientID, DCM_PatientBirthDate, DCM_PatientSex,
                                      DCM_StudyDate,       DCM_StudyTime, DCM_AccessionNumber,  DCM_StudyID,
                                      DCM_ReferringPhysicianName};
  DcmItem* src = ref != nullptr ? ref->first->getDataset() : nullptr;
  for (const DcmTagKey& key : kCopied) {
    // De-identified: every one of these is Type 2 here (action Z: empty).
    const std::string v = deidentify.enabled ? "" : GetString(src, key);
    ds->putAndInsertString(key, v.c_str());
  }
  ds->putAndInsertString(DCM_StudyInstanceUID, study_uid.c_str());
  if (!deidentify.enabled) return;
  std::string id = GetString(src, DCM_PatientID);
  if (id.empty()) id = GetString(src, DCM_PatientName);
  const std::string pseudonym = PatientPseudonym(deidentify.salt, id);
  ds->putAndInsertString(DCM_PatientName, pseudonym.c_str());
  ds->putAndInsertString(DCM_PatientID, pseudonym.c_str());
  ds->putAndInsertString(DCM_PatientIdentityRemoved, "YES");
  ds->putAndInsertString(DCM_DeidentificationMethod,
                         "PS3.15 E.1.1 Basic Profile; keyed-hash UIDs");
  DcmItem* code = nullptr;
  if (ds->findOrCreateSequenceItem(DCM_DeidentificationMethodCodeSequence, code, -2).good() && code) {
    code->putAndInsertString(DCM_CodeValue, "113100");
    code->putAndInsertString(DCM_CodingSchemeDesignator, "DCM");
    code->putAndInsertString(DCM_CodeMeaning, "Basic Application Confidentiality Profile");
  }
  ds->putAndInsertString(DCM_LongitudinalTemporalInformationModified, "REMOVED");
}

std::string StudyUidFor(const Reference* ref, const Deidentification& deidentify) {
  const std::string uid = ref != nullptr ? GetString(ref->first->getDataset(), DCM_StudyInstanceUID) : "";
  return uid.empty() ? NewUid(SITE_STUDY_UID_ROOT, deidentify) : CopiedUid(deidentify, uid);
}

std::string FrameOfReferenceUidFor(const Reference* ref, bool same_frame_of_reference,
                                   const Deidentification& deidentify) {
  const std::string uid =
      ref != nullptr && same_frame_of_reference ? GetString(ref->first->getDataset(), DCM_FrameOfReferenceUID) : "";
  return uid.empty() ? NewUid(SITE_UID_ROOT, deidentify) : CopiedUid(deidentify, uid);
}

}  // namespace tessera::dicom::internal
