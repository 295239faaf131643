#include "common/dicom/dicom_series.h"

#include <dcmtk/config/osconfig.h>
#include <dcmtk/dcmdata/dcdeftag.h>
#include <dcmtk/dcmdata/dcfilefo.h>
#include <dcmtk/dcmdata/dcistrmb.h>
#include <dcmtk/dcmdata/dcmetinf.h>
#include <dcmtk/dcmdata/dcpixel.h>
#include <dcmtk/dcmdata/dcrledrg.h>
#include <dcmtk/dcmdata/dcxfer.h>
#include <dcmtk/dcmjpeg/djdecode.h>
#include <dcmtk/dcmjpls/djdecode.h>
#include <dcmtk/oflog/oflog.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/dicom/zip_reader.h"
#include "common/status.h"

namespace tessera::dicom {
namespace {

using Vec3 = std::array<double, 3>;

Vec3 Cross(const Vec3& a, const Vec3& b) {
  return {a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]};
}
double Dot(const Vec3& a, const Vec3& b) { return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]; }
double Norm(const Vec3& a) { return std::sqrt(Dot(a, a)); }

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}
bool IsRegular(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool HasPreamble(const std::string& bytes) { return bytes.size() >= 132 && std::memcmp(bytes.data() + 128, "DICM", 4) == 0; }

struct Frame {
  int file = 0;   // index into the parsed files
  int frame = 0;  // frame within the file
  Vec3 ipp{};
  std::array<double, 6> iop{};
  bool has_ipp = false, has_iop = false;
  double ps_row = 0, ps_col = 0;  // PixelSpacing[0] (between rows), [1] (between columns)
  double thickness = 0, spacing_between = 0;
  double slope = 1, intercept = 0;
  long instance = 0;
  double d = 0;  // position along the normal
};

struct ParsedFile {
  std::string name;
  std::unique_ptr<DcmFileFormat> ff;
  std::string series_uid, description, modality, patient_id, study_uid, xfer_uid;
  long series_number = 0;
  int rows = 0, cols = 0, bits = 0, pixel_rep = 0, samples = 1;
  long frames = 1;
  const uint8_t* pixels = nullptr;
  size_t pixel_bytes = 0;
};

std::string GetString(DcmItem* item, const DcmTagKey& tag) {
  OFString v;
  if (item != nullptr && item->findAndGetOFString(tag, v).good()) return std::string(v.c_str());
  return "";
}

// `n` values of a numeric (DS/FD) attribute, searched in the given items in
// order (per-frame group, shared group, dataset).
bool GetDoubles(const std::vector<DcmItem*>& items, const DcmTagKey& seq, const DcmTagKey& tag, int n, double* out) {
  for (DcmItem* item : items) {
    if (item == nullptr) continue;
    DcmItem* holder = item;
    if (seq != DcmTagKey()) {
      DcmItem* sub = nullptr;
      if (item->findAndGetSequenceItem(seq, sub, 0).bad() || sub == nullptr) continue;
      holder = sub;
    }
    bool ok = true;
    for (int i = 0; i < n && ok; ++i) {
      Float64 v = 0;
      ok = holder->findAndGetFloat64(tag, v, i).good();
      out[i] = v;
    }
    if (ok) return true;
  }
  return false;
}

absl::StatusOr<ParsedFile> ParseDicom(const std::string& name, const std::string& bytes) {
  auto bad = [&](const std::string& why) { return absl::InvalidArgumentError(absl::StrCat(name, ": ", why)); };
  ParsedFile pf;
  pf.name = name;
  pf.ff = std::make_unique<DcmFileFormat>();
  {
    DcmInputBufferStream stream;
    stream.setBuffer(bytes.data(), static_cast<offile_off_t>(bytes.size()));
    stream.setEos();
    pf.ff->transferInit();
    const OFCondition cond = pf.ff->read(stream, EXS_Unknown, EGL_noChange, DCM_MaxReadLength);
    pf.ff->transferEnd();
    if (cond.bad()) return bad(absl::StrCat("not a readable DICOM file (", cond.text(), ")"));
  }
  DcmDataset* ds = pf.ff->getDataset();
  if (ds == nullptr || ds->card() == 0) return bad("not a DICOM file (no data elements)");
  pf.xfer_uid = GetString(pf.ff->getMetaInfo(), DCM_TransferSyntaxUID);
  pf.series_uid = GetString(ds, DCM_SeriesInstanceUID);
  pf.description = GetString(ds, DCM_SeriesDescription);
  pf.modality = GetString(ds, DCM_Modality);
  pf.patient_id = GetString(ds, DCM_PatientID);
  pf.study_uid = GetString(ds, DCM_StudyInstanceUID);
  {
    Sint32 v = 0;
    if (ds->findAndGetSint32(DCM_SeriesNumber, v).good()) pf.series_number = v;
  }
  Uint16 rows = 0, cols = 0, bits = 0, rep = 0, samples = 1;
  if (ds->findAndGetUint16(DCM_Rows, rows).bad() || ds->findAndGetUint16(DCM_Columns, cols).bad() || rows == 0 ||
      cols == 0) {
    return bad("no image (Rows/Columns missing)");
  }
  ds->findAndGetUint16(DCM_BitsAllocated, bits);
  ds->findAndGetUint16(DCM_PixelRepresentation, rep);
  ds->findAndGetUint16(DCM_SamplesPerPixel, samples);
  pf.rows = rows;
  pf.cols = cols;
  pf.bits = bits;
  pf.pixel_rep = rep;
  pf.samples = samples;
  {
    Sint32 nf = 1;
    if (ds->findAndGetSint32(DCM_NumberOfFrames, nf).good()) pf.frames = nf;
    if (pf.frames < 1) return bad(absl::StrCat("NumberOfFrames ", pf.frames));
  }
  if (samples != 1) return bad(absl::StrCat("colour images (SamplesPerPixel ", samples, ") are not supported"));
  if (bits != 8 && bits != 16 && bits != 32) return bad(absl::StrCat("BitsAllocated ", bits, " is not supported"));
  if (!ds->tagExists(DCM_PixelData)) return bad("no pixel data");
  // Decode compressed pixel data to explicit little endian.
  const E_TransferSyntax xfer = ds->getOriginalXfer();
  if (DcmXfer(xfer).isEncapsulated()) {
    const OFCondition c = ds->chooseRepresentation(EXS_LittleEndianExplicit, nullptr);
    if (c.bad() || !ds->canWriteXfer(EXS_LittleEndianExplicit)) {
      return bad(absl::StrCat("cannot decode pixel data of transfer syntax ", DcmXfer(xfer).getXferName(), " (",
                              pf.xfer_uid, "): ", c.text()));
    }
  }
  DcmElement* el = nullptr;
  if (ds->findAndGetElement(DCM_PixelData, el).bad() || el == nullptr) return bad("no pixel data");
  const size_t need = static_cast<size_t>(rows) * cols * (bits / 8) * static_cast<size_t>(pf.frames);
  if (bits == 8) {
    Uint8* p = nullptr;
    if (el->getUint8Array(p).bad() || p == nullptr) return bad("unreadable pixel data");
    pf.pixels = p;
  } else if (bits == 16) {
    Uint16* p = nullptr;
    if (el->getUint16Array(p).bad() || p == nullptr) return bad("unreadable pixel data");
    pf.pixels = reinterpret_cast<const uint8_t*>(p);
  } else {
    Uint32* p = nullptr;
    if (el->getUint32Array(p).bad() || p == nullptr) {
      Uint8* q = nullptr;  // OB/OW holding 32-bit samples
      if (el->getUint8Array(q).bad() || q == nullptr) return bad("unreadable pixel data");
      pf.pixels = q;
    } else {
      pf.pixels = reinterpret_cast<const uint8_t*>(p);
    }
  }
  pf.pixel_bytes = el->getLength();
  if (pf.pixel_bytes < need) {
    return bad(absl::StrCat("pixel data holds ", pf.pixel_bytes, " bytes, ", pf.frames, " frame(s) of ", cols, "x",
                            rows, "x", bits, " bits need ", need, " (truncated?)"));
  }
  return pf;
}

// The frames of one parsed file with their geometry and rescale.
absl::Status CollectFrames(const ParsedFile& pf, int file_index, std::vector<Frame>* frames) {
  DcmDataset* ds = pf.ff->getDataset();
  DcmItem* shared = nullptr;
  ds->findAndGetSequenceItem(DCM_SharedFunctionalGroupsSequence, shared, 0);
  long instance = 0;
  {
    Sint32 v = 0;
    if (ds->findAndGetSint32(DCM_InstanceNumber, v).good()) instance = v;
  }
  for (long f = 0; f < pf.frames; ++f) {
    DcmItem* per = nullptr;
    if (pf.frames > 1 || ds->tagExists(DCM_PerFrameFunctionalGroupsSequence)) {
      ds->findAndGetSequenceItem(DCM_PerFrameFunctionalGroupsSequence, per, static_cast<int>(f));
    }
    const std::vector<DcmItem*> items = {per, shared, ds};
    Frame fr;
    fr.file = file_index;
    fr.frame = static_cast<int>(f);
    fr.instance = instance * 100000 + f;
    fr.has_ipp = GetDoubles(items, DCM_PlanePositionSequence, DCM_ImagePositionPatient, 3, fr.ipp.data()) ||
                 GetDoubles({ds}, DcmTagKey(), DCM_ImagePositionPatient, 3, fr.ipp.data());
    fr.has_iop = GetDoubles(items, DCM_PlaneOrientationSequence, DCM_ImageOrientationPatient, 6, fr.iop.data()) ||
                 GetDoubles({ds}, DcmTagKey(), DCM_ImageOrientationPatient, 6, fr.iop.data());
    double ps[2] = {0, 0};
    if (GetDoubles(items, DCM_PixelMeasuresSequence, DCM_PixelSpacing, 2, ps) ||
        GetDoubles({ds}, DcmTagKey(), DCM_PixelSpacing, 2, ps)) {
      fr.ps_row = ps[0];
      fr.ps_col = ps[1];
    }
    GetDoubles(items, DCM_PixelMeasuresSequence, DCM_SliceThickness, 1, &fr.thickness) ||
        GetDoubles({ds}, DcmTagKey(), DCM_SliceThickness, 1, &fr.thickness);
    GetDoubles(items, DCM_PixelMeasuresSequence, DCM_SpacingBetweenSlices, 1, &fr.spacing_between) ||
        GetDoubles({ds}, DcmTagKey(), DCM_SpacingBetweenSlices, 1, &fr.spacing_between);
    double v = 0;
    if (GetDoubles(items, DCM_PixelValueTransformationSequence, DCM_RescaleSlope, 1, &v) ||
        GetDoubles({ds}, DcmTagKey(), DCM_RescaleSlope, 1, &v)) {
      if (v != 0) fr.slope = v;
    }
    if (GetDoubles(items, DCM_PixelValueTransformationSequence, DCM_RescaleIntercept, 1, &v) ||
        GetDoubles({ds}, DcmTagKey(), DCM_RescaleIntercept, 1, &v)) {
      fr.intercept = v;
    }
    if (!fr.has_ipp) return absl::InvalidArgumentError(absl::StrCat(pf.name, ": no ImagePositionPatient (frame ", f + 1, ")"));
    if (!fr.has_iop) {
      return absl::InvalidArgumentError(absl::StrCat(pf.name, ": no ImageOrientationPatient (frame ", f + 1, ")"));
    }
    if (!(fr.ps_row > 0) || !(fr.ps_col > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(pf.name, ": no valid PixelSpacing (frame ", f + 1, ")"));
    }
    frames->push_back(fr);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Source {
  std::string name;
  std::string bytes;
  bool must_be_dicom;  // an explicitly named file
};

absl::StatusOr<std::vector<Source>> GatherSources(const std::vector<std::string>& inputs, int64_t max_bytes) {
  if (inputs.empty()) return absl::InvalidArgumentError("no DICOM input given");
  std::vector<Source> out;
  int64_t total = 0;
  auto charge = [&](const std::string& name, int64_t bytes) -> absl::Status {
    total += bytes;
    if (total > max_bytes) {
      return absl::ResourceExhaustedError(
          absl::StrCat(name, ": the DICOM input exceeds the limit of ", max_bytes, " bytes read"));
    }
    return absl::OkStatus();
  };
  auto file_size = [](const std::string& p) -> int64_t {
    struct stat st;
    return stat(p.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  };
  for (const std::string& in : inputs) {
    if (IsDir(in)) {
      DIR* dir = opendir(in.c_str());
      if (dir == nullptr) return absl::NotFoundError(absl::StrCat(in, ": cannot list directory"));
      std::vector<std::string> names;
      while (dirent* e = readdir(dir)) {
        const std::string n = e->d_name;
        if (n == "." || n == "..") continue;
        names.push_back(n);
      }
      closedir(dir);
      std::sort(names.begin(), names.end());
      for (const std::string& n : names) {
        const std::string p = in + "/" + n;
        if (!IsRegular(p)) continue;
        TESSERA_RETURN_IF_ERROR(charge(p, file_size(p)));
        TESSERA_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(p));
        if (!HasPreamble(bytes)) continue;  // LICENSE, JSON sidecars, DICOMDIR-less junk
        out.push_back({p, std::move(bytes), false});
      }
    } else if (!IsRegular(in)) {
      return absl::NotFoundError(absl::StrCat(in, ": no such file or directory"));
    } else if (LooksLikeZip(in)) {
      TESSERA_RETURN_IF_ERROR(charge(in, file_size(in)));
      TESSERA_ASSIGN_OR_RETURN(std::vector<ZipMember> members, ReadZip(in, max_bytes - total));
      std::sort(members.begin(), members.end(), [](const ZipMember& a, const ZipMember& b) { return a.name < b.name; });
      for (ZipMember& m : members) {
        if (!HasPreamble(m.bytes)) continue;
        out.push_back({absl::StrCat(in, "!", m.name), std::move(m.bytes), false});
      }
    } else {
      TESSERA_RETURN_IF_ERROR(charge(in, file_size(in)));
      TESSERA_ASSIGN_OR_RETURN(std::string bytes, ReadWholeFile(in));
      out.push_back({in, std::move(bytes), true});
    }
  }
  if (out.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(absl::StrJoin(inputs, ", "), ": no DICOM files (none with the DICM preamble)"));
  }
  return out;
}

std::string Fmt(double v) { return absl::StrFormat("%.4g", v); }

}  // namespace

void InitDcmtkOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    // DCMTK logs parse warnings to stderr; our errors carry the reason instead.
    OFLog::configure(OFLogger::FATAL_LOG_LEVEL);
    DJDecoderRegistration::registerCodecs();     // JPEG baseline/extended/lossless
    DJLSDecoderRegistration::registerCodecs();   // JPEG-LS
    DcmRLEDecoderRegistration::registerCodecs();  // RLE
  });
}

bool IsDicomPath(const std::string& path) {
  if (IsDir(path)) return true;
  if (!IsRegular(path)) return false;
  if (LooksLikeZip(path)) return true;
  std::ifstream in(path, std::ios::binary);
  char buf[132] = {};
  if (!in.read(buf, 132)) return false;
  return std::memcmp(buf + 128, "DICM", 4) == 0;
}

Mat4 DicomStackAffine(Vec3 along_row, Vec3 down_column, Vec3 slice_step, Vec3 first_position, int64_t rows,
                      bool flip_rows) {
  for (Vec3* v : {&along_row, &down_column, &slice_step, &first_position}) {
    (*v)[0] = -(*v)[0];
    (*v)[1] = -(*v)[1];
  }
  if (flip_rows) {
    for (int q = 0; q < 3; ++q) {
      first_position[q] += (rows - 1) * down_column[q];
      down_column[q] = -down_column[q];
    }
  }
  Mat4 affine{};
  for (int q = 0; q < 3; ++q) {
    affine[q * 4 + 0] = along_row[q];
    affine[q * 4 + 1] = down_column[q];
    affine[q * 4 + 2] = slice_step[q];
    affine[q * 4 + 3] = first_position[q];
  }
  affine[15] = 1;
  return affine;
}

std::string PeekDicomModality(const std::string& path) {
  std::string file;
  if (IsDir(path)) {
    std::vector<std::string> names;
    if (DIR* dir = opendir(path.c_str())) {
      while (dirent* e = readdir(dir)) names.push_back(e->d_name);
      closedir(dir);
    }
    std::sort(names.begin(), names.end());
    for (const std::string& name : names) {
      const std::string candidate = path + "/" + name;
      if (name != "." && name != ".." && IsRegular(candidate) && !LooksLikeZip(candidate) &&
          IsDicomPath(candidate)) {
        file = candidate;
        break;
      }
    }
  } else if (IsRegular(path) && !LooksLikeZip(path) && IsDicomPath(path)) {
    file = path;
  }
  if (file.empty()) return "";
  InitDcmtkOnce();
  DcmFileFormat format;
  // Elements longer than 4 KiB (pixel data) stay on disk.
  if (format.loadFile(file.c_str(), EXS_Unknown, EGL_noChange, 4096).bad()) return "";
  OFString modality;
  if (format.getDataset()->findAndGetOFString(DCM_Modality, modality).bad()) return "";
  return modality.c_str();
}

absl::StatusOr<DicomSeries> ReadDicomSeries(const std::vector<std::string>& inputs, const DicomReadOptions& options) {
  InitDcmtkOnce();
  TESSERA_ASSIGN_OR_RETURN(std::vector<Source> sources, GatherSources(inputs, options.max_bytes));
  std::vector<ParsedFile> files;
  files.reserve(sources.size());
  for (Source& s : sources) {
    if (s.must_be_dicom && !HasPreamble(s.bytes) && s.bytes.size() < 8) {
      return absl::InvalidArgumentError(absl::StrCat(s.name, ": not a DICOM file (", s.bytes.size(), " bytes)"));
    }
    TESSERA_ASSIGN_OR_RETURN(ParsedFile pf, ParseDicom(s.name, s.bytes));
    std::string().swap(s.bytes);
    files.push_back(std::move(pf));
  }

  // Series: ordered by SeriesNumber, then UID.
  std::map<std::string, std::vector<int>> by_uid;
  for (int i = 0; i < static_cast<int>(files.size()); ++i) by_uid[files[i].series_uid].push_back(i);
  std::vector<std::string> uids;
  for (const auto& [uid, idx] : by_uid) uids.push_back(uid);
  std::stable_sort(uids.begin(), uids.end(), [&](const std::string& a, const std::string& b) {
    return files[by_uid[a][0]].series_number < files[by_uid[b][0]].series_number;
  });
  auto listing = [&] {
    std::vector<std::string> lines;
    for (size_t s = 0; s < uids.size(); ++s) {
      const ParsedFile& f = files[by_uid[uids[s]][0]];
      lines.push_back(absl::StrCat(s + 1, ": ", uids[s].empty() ? "(no SeriesInstanceUID)" : uids[s], " #",
                                   f.series_number, " ", f.modality, " \"", f.description, "\" (",
                                   by_uid[uids[s]].size(), " files)"));
    }
    return absl::StrJoin(lines, "; ");
  };
  std::string chosen;
  if (!options.series.empty()) {
    int index = 0;
    if (by_uid.count(options.series)) {
      chosen = options.series;
    } else if (absl::SimpleAtoi(options.series, &index) && index >= 1 && index <= static_cast<int>(uids.size())) {
      chosen = uids[index - 1];
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("series '", options.series, "' is neither a SeriesInstanceUID nor an index of: ", listing()));
    }
  } else if (uids.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("the input holds ", uids.size(),
                                                   " series; choose one by UID or index: ", listing()));
  } else {
    chosen = uids[0];
  }
  const std::vector<int>& members = by_uid[chosen];
  const ParsedFile& first = files[members[0]];

  std::vector<Frame> frames;
  for (int i : members) {
    const ParsedFile& f = files[i];
    if (f.rows != first.rows || f.cols != first.cols) {
      return absl::InvalidArgumentError(absl::StrCat("inconsistent dimensions: ", first.name, " is ", first.cols, "x",
                                                     first.rows, ", ", f.name, " is ", f.cols, "x", f.rows));
    }
    if (f.bits != first.bits || f.pixel_rep != first.pixel_rep) {
      return absl::InvalidArgumentError(absl::StrCat("inconsistent pixel type: ", first.name, " has ", first.bits,
                                                     " bits (representation ", first.pixel_rep, "), ", f.name, " ",
                                                     f.bits, " (", f.pixel_rep, ")"));
    }
    TESSERA_RETURN_IF_ERROR(CollectFrames(f, i, &frames));
  }
  const Frame& f0 = frames[0];
  for (const Frame& fr : frames) {
    for (int q = 0; q < 6; ++q) {
      if (std::abs(fr.iop[q] - f0.iop[q]) > 1e-4) {
        return absl::InvalidArgumentError(absl::StrCat(
            "multiple orientations in one series: ", files[f0.file].name, " has ImageOrientationPatient ",
            absl::StrJoin(f0.iop, "\\"), ", ", files[fr.file].name, " frame ", fr.frame + 1, " has ",
            absl::StrJoin(fr.iop, "\\")));
      }
    }
    if (std::abs(fr.ps_row - f0.ps_row) > 1e-4 || std::abs(fr.ps_col - f0.ps_col) > 1e-4) {
      return absl::InvalidArgumentError(absl::StrCat("inconsistent PixelSpacing: ", files[f0.file].name, " ",
                                                     f0.ps_row, "\\", f0.ps_col, ", ", files[fr.file].name, " ",
                                                     fr.ps_row, "\\", fr.ps_col));
    }
  }
  Vec3 r = {f0.iop[0], f0.iop[1], f0.iop[2]};
  Vec3 c = {f0.iop[3], f0.iop[4], f0.iop[5]};
  if (Norm(r) < 1e-3 || Norm(c) < 1e-3) return absl::InvalidArgumentError("ImageOrientationPatient is degenerate");
  for (int q = 0; q < 3; ++q) {
    r[q] /= Norm({f0.iop[0], f0.iop[1], f0.iop[2]});
  }
  const double cn = Norm(c);
  for (double& x : c) x /= cn;
  Vec3 n = Cross(r, c);
  const double nn = Norm(n);
  if (nn < 1e-3) return absl::InvalidArgumentError("ImageOrientationPatient rows are parallel");
  for (double& x : n) x /= nn;
  for (Frame& fr : frames) fr.d = Dot(fr.ipp, n);
  std::stable_sort(frames.begin(), frames.end(), [](const Frame& a, const Frame& b) {
    return a.d != b.d ? a.d < b.d : a.instance < b.instance;
  });
  const int nz = static_cast<int>(frames.size());
  auto where = [&](int k) {
    return absl::StrCat(files[frames[k].file].name, files[frames[k].file].frames > 1 ? absl::StrCat(" frame ", frames[k].frame + 1) : "");
  };
  Vec3 step;
  if (nz == 1) {
    const double dz = f0.spacing_between > 0 ? f0.spacing_between : (f0.thickness > 0 ? f0.thickness : 1.0);
    step = {n[0] * dz, n[1] * dz, n[2] * dz};
  } else {
    std::vector<double> gaps(nz - 1);
    for (int k = 0; k + 1 < nz; ++k) {
      gaps[k] = frames[k + 1].d - frames[k].d;
      if (gaps[k] < 1e-3) {
        return absl::InvalidArgumentError(absl::StrCat(
            "duplicate slice positions (", Fmt(frames[k].d), " mm along the normal): ", where(k), " and ", where(k + 1),
            " (several acquisitions, echoes or time points in one series are not supported)"));
      }
    }
    for (int q = 0; q < 3; ++q) step[q] = (frames[nz - 1].ipp[q] - frames[0].ipp[q]) / (nz - 1);
    // Tilt: the slice direction must be the normal.
    const double cosang = std::min(1.0, std::abs(Dot(step, n)) / Norm(step));
    const double angle = std::acos(cosang) * 180.0 / M_PI;
    if (angle > 0.1) {
      double tilt = 0;
      const bool has_tilt = GetDoubles({files[f0.file].ff->getDataset()}, DcmTagKey(), DCM_GantryDetectorTilt, 1, &tilt);
      return absl::InvalidArgumentError(absl::StrCat(
          "gantry tilt: the slice direction is ", Fmt(angle), " degrees from the normal of ImageOrientationPatient",
          has_tilt ? absl::StrCat(" (GantryDetectorTilt ", Fmt(tilt), ")") : "",
          "; tilted series are not resampled (dcm2niix writes a tilt-corrected copy); slice gaps along the normal: ",
          absl::StrJoin(gaps, ", ", [](std::string* o, double g) { o->append(Fmt(g)); }), " mm"));
    }
    const double gmin = *std::min_element(gaps.begin(), gaps.end());
    const double gmax = *std::max_element(gaps.begin(), gaps.end());
    const double tol = std::max(0.01, 0.005 * gmin);
    if (gmax - gmin > tol) {
      bool multiples = true;
      std::vector<std::string> holes;
      for (int k = 0; k + 1 < nz; ++k) {
        const double m = gaps[k] / gmin;
        if (std::abs(m - std::round(m)) * gmin > tol) multiples = false;
        if (std::round(m) >= 2) {
          holes.push_back(absl::StrCat(std::llround(m) - 1, " between ", where(k), " and ", where(k + 1)));
        }
      }
      if (multiples) {
        return absl::InvalidArgumentError(absl::StrCat("missing slices (spacing ", Fmt(gmin),
                                                       " mm): ", absl::StrJoin(holes, "; ")));
      }
      return absl::InvalidArgumentError(absl::StrCat(
          "uneven slice spacing: gaps along the normal ",
          absl::StrJoin(gaps, ", ", [](std::string* o, double g) { o->append(Fmt(g)); }), " mm"));
    }
  }

  // Values: output type.
  const int nx = first.cols, ny = first.rows;
  bool identity = true, integral = true;
  for (const Frame& fr : frames) {
    if (fr.slope != 1 || fr.intercept != 0) identity = false;
    if (fr.slope != 1 || fr.intercept != std::round(fr.intercept)) integral = false;
  }
  const size_t per_frame = static_cast<size_t>(nx) * ny;
  auto sample = [&](const ParsedFile& pf, size_t index) -> double {
    const uint8_t* p = pf.pixels;
    switch (pf.bits) {
      case 8:
        return pf.pixel_rep ? static_cast<double>(reinterpret_cast<const int8_t*>(p)[index]) : p[index];
      case 16:
        return pf.pixel_rep ? static_cast<double>(reinterpret_cast<const int16_t*>(p)[index])
                            : reinterpret_cast<const uint16_t*>(p)[index];
      default: {
        uint32_t u;
        std::memcpy(&u, p + 4 * index, 4);
        return pf.pixel_rep ? static_cast<double>(static_cast<int32_t>(u)) : u;
      }
    }
  };
  DType dtype = DType::kFloat32;
  if (identity) {
    if (first.bits == 8) dtype = first.pixel_rep ? DType::kInt8 : DType::kUInt8;
    if (first.bits == 16) dtype = first.pixel_rep ? DType::kInt16 : DType::kUInt16;
    if (first.bits == 32) dtype = first.pixel_rep ? DType::kInt32 : DType::kFloat32;
  } else if (integral) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (const Frame& fr : frames) {
      const ParsedFile& pf = files[fr.file];
      const size_t base = per_frame * fr.frame;
      for (size_t q = 0; q < per_frame; ++q) {
        const double v = sample(pf, base + q) + fr.intercept;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
    }
    dtype = (lo >= -32768 && hi <= 32767) ? DType::kInt16 : (lo >= -2147483648.0 && hi <= 2147483647.0 ? DType::kInt32 : DType::kFloat32);
  }
  TESSERA_ASSIGN_OR_RETURN(NDArray data, NDArray::Allocate({nx, ny, nz}, dtype));
  for (int k = 0; k < nz; ++k) {
    const Frame& fr = frames[k];
    const ParsedFile& pf = files[fr.file];
    const size_t base = per_frame * fr.frame;
    for (int y = 0; y < ny; ++y) {
      const int j = options.flip_rows ? ny - 1 - y : y;
      const size_t out_row = static_cast<size_t>(nx) * (j + static_cast<size_t>(ny) * k);
      const size_t in_row = base + static_cast<size_t>(nx) * y;
      for (int x = 0; x < nx; ++x) {
        const double v = sample(pf, in_row + x) * fr.slope + fr.intercept;
        switch (dtype) {
          case DType::kUInt8: data.data<uint8_t>()[out_row + x] = static_cast<uint8_t>(v); break;
          case DType::kInt8: data.data<int8_t>()[out_row + x] = static_cast<int8_t>(v); break;
          case DType::kUInt16: data.data<uint16_t>()[out_row + x] = static_cast<uint16_t>(v); break;
          case DType::kInt16: data.data<int16_t>()[out_row + x] = static_cast<int16_t>(v); break;
          case DType::kInt32: data.data<int32_t>()[out_row + x] = static_cast<int32_t>(v); break;
          default: data.data<float>()[out_row + x] = static_cast<float>(v); break;
        }
      }
    }
  }

  // Affine: LPS columns, then RAS, then the row flip.
  Vec3 col0 = {r[0] * f0.ps_col, r[1] * f0.ps_col, r[2] * f0.ps_col};
  Vec3 col1 = {c[0] * f0.ps_row, c[1] * f0.ps_row, c[2] * f0.ps_row};
  TESSERA_ASSIGN_OR_RETURN(Geometry geometry,
                           Geometry::FromAffine(DicomStackAffine(col0, col1, step, frames[0].ipp, ny, options.flip_rows)));

  DicomSeries out;
  out.volume.data = std::move(data);
  out.volume.geometry = geometry;
  out.volume.description = first.description;
  DicomSeriesInfo& info = out.info;
  info.modality = first.modality;
  info.patient_id = first.patient_id;
  info.study_instance_uid = first.study_uid;
  info.series_instance_uid = chosen;
  info.series_description = first.description;
  info.series_number = static_cast<int>(first.series_number);
  info.num_files = static_cast<int>(members.size());
  info.num_frames = nz;
  info.transfer_syntax = first.xfer_uid;
  for (const Frame& fr : frames) {
    if (info.files.empty() || info.files.back() != files[fr.file].name) info.files.push_back(files[fr.file].name);
  }
  return out;
}

}  // namespace tessera::dicom
