// ReadDicomSeg (dicom_seg.h): a Segmentation object (ours or another
// tool's) as a label volume with ReadDicomSeries' geometry.
#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcitem.h>
#include <dcmtk/dcmdata/dcmetinf.h>
#include <dcmtk/dcmdata/dcuid.h>
#include <dcmtk/dcmdata/dcxfer.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/dicom/dicom_seg.h"
#include "common/dicom/dicom_series.h"
#include "common/status.h"

namespace tessera::dicom {
namespace {

using Vec3 = std::array<double, 3>;

double Dot(const Vec3& a, const Vec3& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
Vec3 Cross(const Vec3& a, const Vec3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
std::string Fmt(double v) { return absl::StrFormat("%.6g", v); }

std::string GetString(DcmItem* item, const DcmTagKey& key) {
  OFString s;
  if (item != nullptr && item->findAndGetOFStringArray(key, s).good()) return s.c_str();
  return "";
}

// `n` numbers of `tag` inside sequence `seq` of the first item that has them.
bool GetDoubles(const std::vector<DcmItem*>& items, const DcmTagKey& seq, const DcmTagKey& tag, int n, double* out) {
  for (DcmItem* item : items) {
    DcmItem* sub = nullptr;
    if (item == nullptr || item->findAndGetSequenceItem(seq, sub, 0).bad() || sub == nullptr) continue;
    bool ok = true;
    for (int i = 0; i < n && ok; ++i) {
      Float64 v = 0;
      ok = sub->findAndGetFloat64(tag, v, i).good();
      out[i] = v;
    }
    if (ok) return true;
  }
  return false;
}

struct SegFrame {
  int segment = 0;
  Vec3 ipp{};
  double d = 0;  // along the normal
  int slice = 0;
};

}  // namespace

bool IsDicomSegFile(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  {
    std::ifstream in(path, std::ios::binary);
    char buf[132] = {};
    if (!in.read(buf, 132) || std::string(buf + 128, 4) != "DICM") return false;
  }
  InitDcmtkOnce();
  DcmFileFormat f;
  if (f.loadFile(path.c_str(), EXS_Unknown, EGL_noChange, 256, ERM_metaOnly).bad()) return false;
  return GetString(f.getMetaInfo(), DCM_MediaStorageSOPClassUID) == UID_SegmentationStorage;
}

absl::StatusOr<DicomSegVolume> ReadDicomSeg(const std::string& path, int64_t max_bytes) {
  InitDcmtkOnce();
  auto bad = [&](const std::string& why) { return absl::InvalidArgumentError(absl::StrCat(path, ": ", why)); };
  {
    struct stat sb;
    if (stat(path.c_str(), &sb) == 0 && sb.st_size > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(path, ": ", sb.st_size, " bytes, more than the ", max_bytes, " allowed"));
    }
  }
  DcmFileFormat file;
  {
    const OFCondition st = file.loadFile(path.c_str());
    if (st.bad()) {
      struct stat sb;
      if (stat(path.c_str(), &sb) != 0) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
      return bad(absl::StrCat("not a readable DICOM file (", st.text(), ")"));
    }
  }
  DcmDataset* ds = file.getDataset();
  const std::string sop_class = GetString(ds, DCM_SOPClassUID);
  if (sop_class != UID_SegmentationStorage) {
    return bad(absl::StrCat("not a DICOM Segmentation (SOPClassUID ", sop_class.empty() ? "missing" : sop_class,
                            "; Segmentation Storage is ", UID_SegmentationStorage, ")"));
  }
  Uint16 rows = 0, cols = 0, bits = 0;
  if (ds->findAndGetUint16(DCM_Rows, rows).bad() || ds->findAndGetUint16(DCM_Columns, cols).bad() || rows == 0 ||
      cols == 0) {
    return bad("no Rows/Columns");
  }
  ds->findAndGetUint16(DCM_BitsAllocated, bits);
  long num_frames = 0;
  {
    Sint32 v = 0;
    if (ds->findAndGetSint32(DCM_NumberOfFrames, v).bad() || v < 1) return bad("no valid NumberOfFrames");
    num_frames = v;
  }
  const std::string type = GetString(ds, DCM_SegmentationType);
  int max_fraction = 0;  // FRACTIONAL: a pixel belongs when value * 2 >= max
  if (type == "BINARY") {
    if (bits != 1) return bad(absl::StrCat("a BINARY segmentation with BitsAllocated ", bits, " (must be 1)"));
  } else if (type == "FRACTIONAL") {
    if (bits != 8) return bad(absl::StrCat("a FRACTIONAL segmentation with BitsAllocated ", bits, " (must be 8)"));
    Uint16 m = 0;
    if (ds->findAndGetUint16(DCM_MaximumFractionalValue, m).bad() || m == 0) return bad("no MaximumFractionalValue");
    max_fraction = m;
  } else {
    return bad(absl::StrCat("SegmentationType '", type, "' is not supported (BINARY, FRACTIONAL)"));
  }
  const E_TransferSyntax xfer = ds->getOriginalXfer();
  if (DcmXfer(xfer).isEncapsulated()) {
    const OFCondition c = ds->chooseRepresentation(EXS_LittleEndianExplicit, nullptr);
    if (c.bad() || !ds->canWriteXfer(EXS_LittleEndianExplicit)) {
      return bad(absl::StrCat("cannot decode pixel data of transfer syntax ", DcmXfer(xfer).getXferName(), ": ",
                              c.text()));
    }
  }
  DcmElement* pixel_element = nullptr;
  Uint8* pixels = nullptr;
  if (ds->findAndGetElement(DCM_PixelData, pixel_element).bad() || pixel_element == nullptr ||
      pixel_element->getUint8Array(pixels).bad() || pixels == nullptr) {
    return bad("no pixel data");
  }
  const int64_t npix = static_cast<int64_t>(rows) * cols;
  const int64_t need = bits == 1 ? (num_frames * npix + 7) / 8 : num_frames * npix;
  if (static_cast<int64_t>(pixel_element->getLength()) < need) {
    return bad(absl::StrCat("pixel data holds ", pixel_element->getLength(), " bytes, ", num_frames, " frame(s) of ",
                            cols, "x", rows, " need ", need, " (truncated?)"));
  }

  // Segments: number -> label value (ours: the private attribute) and name.
  DicomSegVolume out;
  std::map<int, int64_t> value_of;
  {
    DcmSequenceOfItems* seq = nullptr;
    if (ds->findAndGetSequence(DCM_SegmentSequence, seq).bad() || seq == nullptr || seq->card() == 0) {
      return bad("no SegmentSequence");
    }
    for (unsigned long i = 0; i < seq->card(); ++i) {
      DcmItem* item = seq->getItem(i);
      Uint16 number = 0;
      if (item->findAndGetUint16(DCM_SegmentNumber, number).bad() || number == 0) {
        return bad(absl::StrCat("SegmentSequence item ", i + 1, " has no SegmentNumber"));
      }
      int64_t value = number;
      if (GetString(item, DcmTagKey(0x0071, 0x0010)) == "TESSERA") {
        int64_t v = 0;
        if (absl::SimpleAtoi(GetString(item, DcmTagKey(0x0071, 0x1001)), &v) && v > 0 && v <= 2147483647) value = v;
      }
      if (!value_of.emplace(number, value).second) return bad(absl::StrCat("segment number ", number, " twice"));
      out.segment_names[value] = GetString(item, DCM_SegmentLabel);
    }
  }

  // Frames: segment and geometry from the per-frame groups, else the shared ones.
  DcmItem* shared = nullptr;
  ds->findAndGetSequenceItem(DCM_SharedFunctionalGroupsSequence, shared, 0);
  DcmSequenceOfItems* per_frame = nullptr;
  ds->findAndGetSequence(DCM_PerFrameFunctionalGroupsSequence, per_frame);
  if (per_frame == nullptr || static_cast<long>(per_frame->card()) != num_frames) {
    return bad(absl::StrCat("PerFrameFunctionalGroupsSequence has ", per_frame ? per_frame->card() : 0,
                            " items for ", num_frames, " frames"));
  }
  std::array<double, 6> iop0{};
  double ps[2] = {0, 0}, spacing_between = 0, thickness = 0;
  std::vector<SegFrame> frames(num_frames);
  DcmObject* node = nullptr;
  for (long f = 0; f < num_frames; ++f) {
    node = per_frame->nextInContainer(node);
    DcmItem* item = static_cast<DcmItem*>(node);
    const std::vector<DcmItem*> items = {item, shared};
    const std::string where = absl::StrCat("frame ", f + 1);
    std::array<double, 6> iop{};
    if (!GetDoubles(items, DCM_PlaneOrientationSequence, DCM_ImageOrientationPatient, 6, iop.data())) {
      return bad(absl::StrCat(where, ": no ImageOrientationPatient"));
    }
    double fps[2] = {0, 0};
    if (!GetDoubles(items, DCM_PixelMeasuresSequence, DCM_PixelSpacing, 2, fps) || !(fps[0] > 0) || !(fps[1] > 0)) {
      return bad(absl::StrCat(where, ": no valid PixelSpacing"));
    }
    if (!GetDoubles(items, DCM_PlanePositionSequence, DCM_ImagePositionPatient, 3, frames[f].ipp.data())) {
      return bad(absl::StrCat(where, ": no ImagePositionPatient"));
    }
    DcmItem* sid = nullptr;
    for (DcmItem* it : items) {
      if (it != nullptr && it->findAndGetSequenceItem(DCM_SegmentIdentificationSequence, sid, 0).good() && sid) break;
      sid = nullptr;
    }
    Uint16 sn = 0;
    if (sid == nullptr || sid->findAndGetUint16(DCM_ReferencedSegmentNumber, sn).bad()) {
      return bad(absl::StrCat(where, ": no ReferencedSegmentNumber"));
    }
    if (value_of.count(sn) == 0) return bad(absl::StrCat(where, ": segment ", sn, " is not in the SegmentSequence"));
    frames[f].segment = sn;
    if (f == 0) {
      iop0 = iop;
      ps[0] = fps[0];
      ps[1] = fps[1];
      GetDoubles(items, DCM_PixelMeasuresSequence, DCM_SpacingBetweenSlices, 1, &spacing_between);
      GetDoubles(items, DCM_PixelMeasuresSequence, DCM_SliceThickness, 1, &thickness);
    } else {
      for (int q = 0; q < 6; ++q) {
        if (std::abs(iop[q] - iop0[q]) > 1e-4) return bad(absl::StrCat(where, ": another ImageOrientationPatient"));
      }
      if (std::abs(fps[0] - ps[0]) > 1e-4 || std::abs(fps[1] - ps[1]) > 1e-4) {
        return bad(absl::StrCat(where, ": another PixelSpacing"));
      }
    }
  }

  // The grid: slices along the normal, from the lowest position to the highest.
  Vec3 r = {iop0[0], iop0[1], iop0[2]}, c = {iop0[3], iop0[4], iop0[5]};
  const double rn = std::sqrt(Dot(r, r)), cn = std::sqrt(Dot(c, c));
  if (rn < 1e-3 || cn < 1e-3) return bad("ImageOrientationPatient is degenerate");
  for (int q = 0; q < 3; ++q) {
    r[q] /= rn;
    c[q] /= cn;
  }
  Vec3 n = Cross(r, c);
  const double nn = std::sqrt(Dot(n, n));
  if (nn < 1e-3) return bad("ImageOrientationPatient rows are parallel");
  for (double& x : n) x /= nn;
  for (SegFrame& fr : frames) fr.d = Dot(fr.ipp, n);
  const auto [lo_it, hi_it] =
      std::minmax_element(frames.begin(), frames.end(), [](const SegFrame& a, const SegFrame& b) { return a.d < b.d; });
  const SegFrame lowest = *lo_it, highest = *hi_it;
  const double in_plane_tol = std::max(0.01, 0.01 * std::min(ps[0], ps[1]));
  for (const SegFrame& fr : frames) {
    Vec3 off;
    for (int q = 0; q < 3; ++q) off[q] = fr.ipp[q] - lowest.ipp[q] - (fr.d - lowest.d) * n[q];
    if (std::sqrt(Dot(off, off)) > in_plane_tol) {
      return bad(absl::StrCat("frames are not on one grid: a frame at ", Fmt(fr.ipp[0]), "\\", Fmt(fr.ipp[1]), "\\",
                              Fmt(fr.ipp[2]), " is shifted in-plane by ", Fmt(std::sqrt(Dot(off, off))), " mm"));
    }
  }
  std::vector<double> positions;
  for (const SegFrame& fr : frames) positions.push_back(fr.d);
  std::sort(positions.begin(), positions.end());
  std::vector<double> distinct;
  for (double d : positions) {
    if (distinct.empty() || d - distinct.back() > 1e-3) distinct.push_back(d);
  }
  double step_mm = spacing_between > 0 ? spacing_between : (thickness > 0 ? thickness : 1.0);
  if (distinct.size() >= 2) {
    double gmin = distinct[1] - distinct[0];
    for (size_t i = 1; i + 1 < distinct.size(); ++i) gmin = std::min(gmin, distinct[i + 1] - distinct[i]);
    auto multiples = [&](double s) {
      const double tol = std::max(0.01, 0.005 * s);
      for (size_t i = 0; i + 1 < distinct.size(); ++i) {
        const double m = (distinct[i + 1] - distinct[i]) / s;
        if (m < 0.5 || std::abs(m - std::round(m)) * s > tol) return false;
      }
      return true;
    };
    if (!(spacing_between > 0 && multiples(spacing_between))) {
      if (!multiples(gmin)) return bad("uneven slice positions: frames are not on one slice grid");
      step_mm = gmin;
    }
  }
  const double extent = highest.d - lowest.d;
  const int64_t nz = std::llround(extent / step_mm) + 1;
  if (nz * npix > (int64_t{1} << 31) || nz * npix * 4 > max_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(path, ": the frames span a grid of ", cols, "x", rows, "x", nz,
                                                     " voxels, more than ", max_bytes, " bytes of labels allowed"));
  }
  for (SegFrame& fr : frames) fr.slice = static_cast<int>(std::llround((fr.d - lowest.d) / step_mm));

  // Labels: the higher segment number wins where segments overlap.
  const int nx = cols, ny = rows;
  std::vector<uint16_t> owner(static_cast<size_t>(nz * npix), 0);
  for (long f = 0; f < num_frames; ++f) {
    const SegFrame& fr = frames[f];
    uint16_t* slice = owner.data() + npix * fr.slice;
    const int64_t start = f * npix, end = start + npix;
    for (int64_t p = start; p < end;) {
      bool on;
      if (bits == 1) {
        // Sparse frames: whole zero bytes are skipped.
        if ((p & 7) == 0 && p + 8 <= end && pixels[p >> 3] == 0) {
          p += 8;
          continue;
        }
        on = (pixels[p >> 3] >> (p & 7)) & 1;
      } else {
        on = pixels[p] > 0 && 2 * pixels[p] >= max_fraction;
      }
      if (on) {
        const int64_t q = p - start;
        uint16_t& o = slice[static_cast<int64_t>(nx) * (ny - 1 - q / nx) + q % nx];  // DICOM row y is j = ny-1-y
        if (fr.segment > o) o = static_cast<uint16_t>(fr.segment);
      }
      ++p;
    }
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray data, NDArray::Allocate({nx, ny, nz}, DType::kInt32));
  std::vector<int32_t> value_of_owner(65536, 0);
  for (const auto& [number, value] : value_of) value_of_owner[number] = static_cast<int32_t>(value);
  int32_t* labels = data.data<int32_t>();
  for (size_t i = 0; i < owner.size(); ++i) labels[i] = value_of_owner[owner[i]];

  // Affine as ReadDicomSeries: LPS columns, RAS, the row flip.
  Vec3 col0 = {r[0] * ps[1], r[1] * ps[1], r[2] * ps[1]};
  Vec3 col1 = {c[0] * ps[0], c[1] * ps[0], c[2] * ps[0]};
  Vec3 step;
  for (int q = 0; q < 3; ++q) step[q] = nz > 1 ? (highest.ipp[q] - lowest.ipp[q]) / (nz - 1) : n[q] * step_mm;
  TESSERA_ASSIGN_OR_RETURN(Geometry geometry,
                           Geometry::FromAffine(DicomStackAffine(col0, col1, step, lowest.ipp, ny, /*flip_rows=*/true)));
  out.labels.data = std::move(data);
  out.labels.geometry = geometry;
  out.labels.description = GetString(ds, DCM_SeriesDescription);
  out.series_instance_uid = GetString(ds, DCM_SeriesInstanceUID);
  out.frame_of_reference_uid = GetString(ds, DCM_FrameOfReferenceUID);
  return out;
}

}  // namespace tessera::dicom
