#include "services/fingerprint/formats/ansi_nist_views.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace fingerprint {
namespace ansi_nist {
namespace {

// Friction ridge position codes of ANSI/NIST-ITL 1-2011 Table 8: fingers 0-19
// (18 unknown friction ridge, 19 EJI or tip), palms 20-38, finger segments
// and tips 40-50.
constexpr int kMaxPosition = 50;
constexpr int kMaxImageSide = 99999;  // HLL/VLL are at most 5 digits

constexpr double kMmPerInch = 25.4;
// 10 micrometre units (legacy 9.012 and EFS) per inch.
constexpr double kUnitsPerInch = 2540.0;

std::string Shown(absl::string_view s) {
  std::string out;
  for (char c : s.substr(0, 24)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (s.size() > 24) out += "...";
  return out;
}

bool ParseInt(absl::string_view s, int* v) {
  if (s.empty() || s.size() > 9) return false;
  int r = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    r = r * 10 + (c - '0');
  }
  *v = r;
  return true;
}

// Pixels per millimetre as the Type-1 NSR/NTR write it: "19.69".
bool ParseDecimal(absl::string_view s, double* v) {
  if (s.empty() || s.size() > 12) return false;
  double r = 0, scale = 0;
  bool digit = false;
  for (char c : s) {
    if (c == '.' && scale == 0) {
      scale = 1;
    } else if (c >= '0' && c <= '9') {
      digit = true;
      if (scale == 0) {
        r = r * 10 + (c - '0');
      } else {
        scale /= 10;
        r += (c - '0') * scale;
      }
    } else {
      return false;
    }
  }
  *v = r;
  return digit;
}

class RecordFields {
 public:
  RecordFields(const Record& rec, int index) : rec_(rec), index_(index) {}

  absl::Status Error(int field, absl::string_view message) const {
    return FieldError(rec_.type, index_, rec_.idc, field, message);
  }
  const Field* Find(int field) const { return rec_.Find(field); }
  // The single value of `field` as an integer in [lo, hi]; `fallback` when
  // the field is absent and not required.
  absl::StatusOr<int> Int(int field, int lo, int hi, bool required, int fallback, absl::string_view what) const {
    const Field* f = rec_.Find(field);
    if (f == nullptr) {
      if (required) return Error(field, "missing");
      return fallback;
    }
    return Value(field, f->value(), lo, hi, what);
  }
  absl::StatusOr<int> Value(int field, absl::string_view s, int lo, int hi, absl::string_view what) const {
    int v = 0;
    if (!ParseInt(s, &v) || v < lo || v > hi) {
      return Error(field, absl::StrCat("'", Shown(s), "' is not ", what, " (", lo, "..", hi, ")"));
    }
    return v;
  }
  const Record& rec() const { return rec_; }

 private:
  const Record& rec_;
  int index_;
};

Compression FromCode(absl::string_view code) {
  const std::string c = absl::AsciiStrToUpper(code);
  if (c == "NONE") return Compression::kNone;
  if (absl::StartsWith(c, "WSQ")) return Compression::kWsq;
  if (c == "JPEGB" || c == "JPEG") return Compression::kJpeg;
  if (c == "JPEGL") return Compression::kJpegLossless;
  if (c == "JP2") return Compression::kJpeg2000;
  if (c == "JP2L") return Compression::kJpeg2000Lossless;
  if (c == "PNG") return Compression::kPng;
  return Compression::kOther;
}

// Type-4 GCA (and Types 3, 5, 6): the numbers of the same table.
Compression FromNumber(int gca) {
  static const Compression kByNumber[] = {Compression::kNone,     Compression::kWsq,
                                          Compression::kJpeg,     Compression::kJpegLossless,
                                          Compression::kJpeg2000, Compression::kJpeg2000Lossless,
                                          Compression::kPng};
  return gca >= 0 && gca <= 6 ? kByNumber[gca] : Compression::kOther;
}

// NSR (1.011) or NTR (1.012) in pixels per inch; 0 when absent or 00.00.
absl::StatusOr<double> Type1Ppi(const Transaction& t, int field) {
  if (t.records.empty()) return 0.0;
  const Field* f = t.records[0].Find(field);
  if (f == nullptr) return 0.0;
  double ppmm = 0;
  if (!ParseDecimal(f->value(), &ppmm) || ppmm > 1000) {
    return FieldError(1, 1, -1, field, absl::StrCat("'", Shown(f->value()), "' is not a resolution in pixels/mm"));
  }
  return ppmm * kMmPerInch;
}

absl::Status CheckPosition(const RecordFields& r, int field, int v) {
  if (v < 0 || v > kMaxPosition) {
    return r.Error(field, absl::StrCat("'", v, "' is not a finger position"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ImageView> BinaryImage(const Transaction& t, const RecordFields& r) {
  ImageView v;
  TESSERA_ASSIGN_OR_RETURN(v.impression_type, r.Int(3, 0, 255, true, 0, "an impression type"));
  const Field* fgp = r.Find(4);
  if (fgp == nullptr || fgp->subfields.empty()) return r.Error(4, "missing");
  for (const std::string& item : fgp->subfields[0]) {
    TESSERA_ASSIGN_OR_RETURN(int p, r.Value(4, item, 0, 255, "a byte"));
    if (p == 255) continue;  // unused slot
    TESSERA_RETURN_IF_ERROR(CheckPosition(r, 4, p));
    v.positions.push_back(p);
  }
  TESSERA_ASSIGN_OR_RETURN(int isr, r.Int(5, 0, 1, true, 0, "a resolution flag"));
  TESSERA_ASSIGN_OR_RETURN(v.ppi, Type1Ppi(t, isr == 0 ? 11 : 12));
  TESSERA_ASSIGN_OR_RETURN(v.width, r.Int(6, 1, 65535, true, 0, "an image width"));
  TESSERA_ASSIGN_OR_RETURN(v.height, r.Int(7, 1, 65535, true, 0, "an image height"));
  TESSERA_ASSIGN_OR_RETURN(int gca, r.Int(8, 0, 255, true, 0, "a compression code"));
  v.compression = FromNumber(gca);
  v.compression_code = absl::StrCat(gca);
  return v;
}

absl::StatusOr<ImageView> TaggedImage(const RecordFields& r) {
  ImageView v;
  const int type = r.rec().type;
  TESSERA_ASSIGN_OR_RETURN(v.impression_type, r.Int(3, 0, 99, true, 0, "an impression type"));
  TESSERA_ASSIGN_OR_RETURN(v.width, r.Int(6, 1, kMaxImageSide, true, 0, "an image width"));
  TESSERA_ASSIGN_OR_RETURN(v.height, r.Int(7, 1, kMaxImageSide, true, 0, "an image height"));
  TESSERA_ASSIGN_OR_RETURN(int slc, r.Int(8, 0, 2, false, 0, "a scale unit"));
  TESSERA_ASSIGN_OR_RETURN(int thps, r.Int(9, 0, 99999, slc != 0, 0, "a pixel density"));
  TESSERA_ASSIGN_OR_RETURN(int tvps, r.Int(10, 0, 99999, false, 0, "a pixel density"));
  (void)tvps;  // square pixels assumed; the vertical density is only checked
  v.ppi = slc == 1 ? thps : slc == 2 ? thps * 2.54 : 0;
  const Field* cga = r.Find(11);
  if (cga == nullptr || cga->value().empty()) return r.Error(11, "missing");
  v.compression_code = cga->value();
  v.compression = FromCode(v.compression_code);
  TESSERA_ASSIGN_OR_RETURN(v.bits_per_pixel, r.Int(12, 1, 64, false, 8, "a pixel depth"));
  const Field* fgp = r.Find(13);
  if (fgp == nullptr) {
    if (type != 15) return r.Error(13, "missing");
  } else {
    for (const Subfield& s : fgp->subfields) {
      TESSERA_ASSIGN_OR_RETURN(int p, r.Value(13, s.empty() ? "" : s[0], 0, 999, "a finger position"));
      TESSERA_RETURN_IF_ERROR(CheckPosition(r, 13, p));
      v.positions.push_back(p);
    }
  }
  return v;
}

// x and y in 10 um units to pixels.
int ToPixels(double units, double ppi) { return static_cast<int>(std::lround(units * ppi / kUnitsPerInch)); }

absl::Status Outside(const MinutiaeView& m, size_t i, int x, int y, int w, int h) {
  return absl::InvalidArgumentError(absl::StrCat(RecordName(9, m.record_index, m.idc), ": minutia ", i + 1, " at (",
                                                 x, ", ", y, ") px lies outside the ", w, "x", h, " image"));
}

}  // namespace

absl::string_view CompressionName(Compression c) {
  switch (c) {
    case Compression::kNone:
      return "none";
    case Compression::kWsq:
      return "wsq";
    case Compression::kJpeg:
      return "jpeg";
    case Compression::kJpegLossless:
      return "jpeg-lossless";
    case Compression::kJpeg2000:
      return "jpeg2000";
    case Compression::kJpeg2000Lossless:
      return "jpeg2000-lossless";
    case Compression::kPng:
      return "png";
    case Compression::kOther:
      break;
  }
  return "other";
}

absl::StatusOr<std::vector<ImageView>> Images(const Transaction& t) {
  std::vector<ImageView> out;
  TESSERA_RETURN_IF_ERROR(Type1Ppi(t, 11).status());
  TESSERA_RETURN_IF_ERROR(Type1Ppi(t, 12).status());
  for (size_t i = 0; i < t.records.size(); ++i) {
    const Record& rec = t.records[i];
    const bool binary = rec.type >= 3 && rec.type <= 6;
    if (!binary && (rec.type < 13 || rec.type > 15)) continue;
    const RecordFields r(rec, static_cast<int>(i) + 1);
    absl::StatusOr<ImageView> v = binary ? BinaryImage(t, r) : TaggedImage(r);
    if (!v.ok()) return v.status();
    const Field* data = rec.Find(kDataField);
    if (data == nullptr || !data->is_binary) return r.Error(kDataField, "missing");
    if (data->binary.empty()) return r.Error(kDataField, "is empty");
    v->record_type = rec.type;
    v->record_index = static_cast<int>(i) + 1;
    v->idc = rec.idc;
    v->data = data->binary;
    if (v->compression == Compression::kNone) {
      const uint64_t need = (uint64_t{static_cast<uint64_t>(v->width)} * static_cast<uint64_t>(v->height) *
                                 static_cast<uint64_t>(v->bits_per_pixel) + 7) / 8;
      if (v->data.size() < need) {
        return r.Error(kDataField, absl::StrCat(v->data.size(), " bytes; an uncompressed ", v->width, "x", v->height,
                                                " image of ", v->bits_per_pixel, " bits needs ", need));
      }
    }
    out.push_back(std::move(*v));
  }
  return out;
}

absl::StatusOr<std::vector<MinutiaeView>> Minutiae(const Transaction& t) {
  std::vector<MinutiaeView> out;
  for (size_t i = 0; i < t.records.size(); ++i) {
    const Record& rec = t.records[i];
    if (rec.type != 9) continue;
    const RecordFields r(rec, static_cast<int>(i) + 1);
    MinutiaeView m;
    m.record_index = static_cast<int>(i) + 1;
    m.idc = rec.idc;
    TESSERA_ASSIGN_OR_RETURN(m.impression_type, r.Int(3, 0, 99, false, 0, "an impression type"));
    if (const Field* fmt = r.Find(4)) m.format = fmt->value();
    if (r.Find(10) != nullptr) {
      m.has_legacy = true;
      TESSERA_ASSIGN_OR_RETURN(m.declared_count, r.Int(10, 0, 9999, true, 0, "a minutiae count"));
      const Field* mrc = r.Find(12);
      if (mrc == nullptr && m.declared_count > 0) return r.Error(12, "missing");
      if (mrc != nullptr) {
        for (const Subfield& s : mrc->subfields) {
          const size_t n = m.legacy.size() + 1;
          if (s.size() < 4) {
            return r.Error(12, absl::StrCat("minutia ", n, " has ", s.size(),
                                            " items (index, XXXXYYYYTTT, quality, type needed)"));
          }
          LegacyMinutia lm;
          TESSERA_ASSIGN_OR_RETURN(lm.index, r.Value(12, s[0], 0, 9999, absl::StrCat("minutia ", n, "'s index")));
          int x = 0, y = 0, th = 0;
          if (s[1].size() != 11 || !ParseInt(s[1].substr(0, 4), &x) || !ParseInt(s[1].substr(4, 4), &y) ||
              !ParseInt(s[1].substr(8, 3), &th) || th > 359) {
            return r.Error(12, absl::StrCat("minutia ", n, ": '", Shown(s[1]), "' is not XXXXYYYYTTT"));
          }
          lm.x = x;
          lm.y = y;
          lm.theta = th;
          TESSERA_ASSIGN_OR_RETURN(lm.quality, r.Value(12, s[2], 0, 63, absl::StrCat("minutia ", n, "'s quality")));
          if (s[3].size() != 1 || s[3][0] < 'A' || s[3][0] > 'D') {
            return r.Error(12, absl::StrCat("minutia ", n, ": '", Shown(s[3]), "' is not a type (A, B, C or D)"));
          }
          lm.type = s[3][0];
          lm.ridge_counts.assign(s.begin() + 4, s.end());
          m.legacy.push_back(std::move(lm));
        }
      }
      if (static_cast<int>(m.legacy.size()) != m.declared_count) {
        return r.Error(12, absl::StrCat("lists ", m.legacy.size(), " minutiae; 9.010 (MIN) says ", m.declared_count));
      }
    }
    if (const Field* roi = r.Find(300)) {
      const Subfield& s = roi->subfields[0];
      if (s.size() < 2) return r.Error(300, "needs at least the width and height items");
      m.has_roi = true;
      TESSERA_ASSIGN_OR_RETURN(m.roi_width, r.Value(300, s[0], 1, 9999999, "an ROI width"));
      TESSERA_ASSIGN_OR_RETURN(m.roi_height, r.Value(300, s[1], 1, 9999999, "an ROI height"));
      if (s.size() > 2 && !s[2].empty()) {
        TESSERA_ASSIGN_OR_RETURN(m.roi_x, r.Value(300, s[2], 0, 9999999, "an ROI offset"));
      }
      if (s.size() > 3 && !s[3].empty()) {
        TESSERA_ASSIGN_OR_RETURN(m.roi_y, r.Value(300, s[3], 0, 9999999, "an ROI offset"));
      }
    }
    if (const Field* efs = r.Find(331)) {
      m.has_efs = true;
      for (const Subfield& s : efs->subfields) {
        const size_t n = m.efs.size() + 1;
        if (s.size() < 4) {
          return r.Error(331, absl::StrCat("minutia ", n, " has ", s.size(), " items (x, y, theta, type needed)"));
        }
        EfsMinutia em;
        TESSERA_ASSIGN_OR_RETURN(em.x, r.Value(331, s[0], 0, 9999999, absl::StrCat("minutia ", n, "'s x")));
        TESSERA_ASSIGN_OR_RETURN(em.y, r.Value(331, s[1], 0, 9999999, absl::StrCat("minutia ", n, "'s y")));
        TESSERA_ASSIGN_OR_RETURN(em.theta, r.Value(331, s[2], 0, 360, absl::StrCat("minutia ", n, "'s theta")));
        if (s[3] != "E" && s[3] != "B" && s[3] != "X") {
          return r.Error(331, absl::StrCat("minutia ", n, ": '", Shown(s[3]), "' is not a type (E, B or X)"));
        }
        em.type = s[3][0];
        m.efs.push_back(em);
      }
    }
    out.push_back(std::move(m));
  }
  return out;
}

absl::StatusOr<Template> MinutiaeTemplate(const Transaction& t, const MinutiaeView& m,
                                          const TemplateOptions& options) {
  const std::string name = RecordName(9, m.record_index, m.idc);
  double ppi = options.ppi;
  int width = options.image_width, height = options.image_height;
  TESSERA_ASSIGN_OR_RETURN(std::vector<ImageView> images, Images(t));
  for (const ImageView& img : images) {
    if (img.idc != m.idc) continue;
    if (ppi <= 0) ppi = img.ppi;
    if (width <= 0) width = img.width;
    if (height <= 0) height = img.height;
    break;
  }
  if (ppi <= 0) {
    TESSERA_ASSIGN_OR_RETURN(ppi, Type1Ppi(t, 11));
  }
  if (ppi <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(name, ": the resolution is unknown (no image with IDC ", m.idc, ", Type-1 NSR 00.00)"));
  }
  Template out;
  out.x_resolution = out.y_resolution = static_cast<int>(std::lround(ppi / 2.54));
  out.impression_type = m.impression_type <= 15 ? m.impression_type : 0;
  const bool use_efs = m.has_efs;
  if (use_efs) {
    if (width <= 0 || height <= 0) {  // the ROI's far corner bounds the image
      width = ToPixels(m.roi_x + m.roi_width, ppi) + 1;
      height = ToPixels(m.roi_y + m.roi_height, ppi) + 1;
      for (const EfsMinutia& e : m.efs) {
        width = std::max(width, ToPixels(m.roi_x + e.x, ppi) + 1);
        height = std::max(height, ToPixels(m.roi_y + e.y, ppi) + 1);
      }
    }
  } else if (height <= 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(name, ": legacy minutiae count y from the image's bottom; the image height is unknown (no "
                           "image with IDC ", m.idc, ")"));
  } else if (width <= 0) {
    width = 1;
    for (const LegacyMinutia& l : m.legacy) width = std::max(width, ToPixels(l.x, ppi) + 1);
  }
  if (width > kMaxCoordinate + 1 || height > kMaxCoordinate + 1) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": image ", width, "x", height, " px exceeds ",
                                                   kMaxCoordinate + 1, " (14-bit coordinates)"));
  }
  out.width = width;
  out.height = height;
  if (use_efs) {
    for (size_t i = 0; i < m.efs.size(); ++i) {
      const EfsMinutia& e = m.efs[i];
      Minutia mm;
      mm.x = ToPixels(m.roi_x + e.x, ppi);
      mm.y = ToPixels(m.roi_y + e.y, ppi);
      if (mm.x >= width || mm.y >= height) return Outside(m, i, mm.x, mm.y, width, height);
      mm.angle = NormalizeAngle(e.theta * (M_PI / 180.0));
      mm.type = e.type == 'E' ? MinutiaType::kEnding : e.type == 'B' ? MinutiaType::kBifurcation : MinutiaType::kOther;
      out.minutiae.push_back(mm);
    }
  } else {
    // The inverse of NBIS to_type9.c: y_units = H_units - 1 - y_top_units,
    // H_units = round(H / ppmm * 100).
    const double ppmm = ppi / kMmPerInch;
    const int h_units = static_cast<int>(std::lround(height / ppmm * 100.0));
    for (size_t i = 0; i < m.legacy.size(); ++i) {
      const LegacyMinutia& l = m.legacy[i];
      Minutia mm;
      mm.x = ToPixels(l.x, ppi);
      mm.y = ToPixels(h_units - 1 - l.y, ppi);
      // Rounding may step one pixel past an edge: clamp that, refuse more.
      if (mm.x == width) mm.x = width - 1;
      if (mm.y == height || mm.y == -1) mm.y = mm.y < 0 ? 0 : height - 1;
      if (mm.x >= width || mm.y < 0 || mm.y >= height) return Outside(m, i, mm.x, mm.y, width, height);
      mm.angle = NormalizeAngle((l.theta + 180) * (M_PI / 180.0));
      mm.type = l.type == 'A' ? MinutiaType::kEnding : l.type == 'B' ? MinutiaType::kBifurcation : MinutiaType::kOther;
      mm.quality = l.quality >= 2 ? static_cast<int>(std::lround(100.0 - (l.quality - 2) * 100.0 / 61.0)) : 0;
      out.minutiae.push_back(mm);
    }
  }
  return out;
}

}  // namespace ansi_nist
}  // namespace fingerprint
}  // namespace tessera
