#include "services/fingerprint/formats/fmr_views.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace fingerprint {
namespace internal {

int EncodeAngle(double radians, AngleUnit unit) {
  const double units = NormalizeAngle(radians) * unit.units_per_circle / (2.0 * M_PI);
  int q = static_cast<int>(std::lround(units));
  if (q >= unit.units_per_circle) q -= unit.units_per_circle;
  return q;
}

double DecodeAngle(int units, AngleUnit unit) { return units * (2.0 * M_PI) / unit.units_per_circle; }

absl::Status ReadFingerViews(ByteReader& r, int num_views, const Template& record, AngleUnit unit,
                             std::vector<Template>* views) {
  views->clear();
  views->reserve(num_views);
  for (int v = 0; v < num_views; ++v) {
    Template view = record;  // the record-level fields; the rest is read below
    const std::string where = absl::StrCat("finger view ", v);
    uint8_t position = 0, view_impression = 0, quality = 0, count = 0;
    TESSERA_RETURN_IF_ERROR(r.Need(4, absl::StrCat(where, " header")));
    TESSERA_RETURN_IF_ERROR(r.U8("finger position", &position));
    TESSERA_RETURN_IF_ERROR(r.U8("view number/impression type", &view_impression));
    TESSERA_RETURN_IF_ERROR(r.U8("finger quality", &quality));
    TESSERA_RETURN_IF_ERROR(r.U8("number of minutiae", &count));
    if (position > 10) return r.Invalid(absl::StrCat(where, ": finger position ", position, " outside 0..10"));
    if (quality > 100) return r.Invalid(absl::StrCat(where, ": finger quality ", quality, " outside 0..100"));
    view.finger_position = position;
    view.view_number = view_impression >> 4;
    view.impression_type = view_impression & 0x0f;
    view.finger_quality = quality;
    TESSERA_RETURN_IF_ERROR(r.Need(size_t{6} * count, absl::StrCat(where, ": ", int{count}, " minutiae")));
    view.minutiae.resize(count);
    for (int i = 0; i < count; ++i) {
      uint16_t tx = 0, ry = 0;
      uint8_t angle = 0, q = 0;
      TESSERA_RETURN_IF_ERROR(r.U16("minutia type/x", &tx));
      TESSERA_RETURN_IF_ERROR(r.U16("minutia y", &ry));
      TESSERA_RETURN_IF_ERROR(r.U8("minutia angle", &angle));
      TESSERA_RETURN_IF_ERROR(r.U8("minutia quality", &q));
      const std::string mwhere = absl::StrCat(where, " minutia ", i);
      const int type = tx >> 14;
      if (type == 3) return r.Invalid(absl::StrCat(mwhere, ": reserved type code 11"));
      if ((ry >> 14) != 0) return r.Invalid(absl::StrCat(mwhere, ": reserved bits above y are set"));
      Minutia& m = view.minutiae[i];
      m.type = static_cast<MinutiaType>(type);
      m.x = tx & 0x3fff;
      m.y = ry & 0x3fff;
      if (m.x >= record.width) {
        return r.Invalid(absl::StrCat(mwhere, ": x=", m.x, " outside the image width ", record.width));
      }
      if (m.y >= record.height) {
        return r.Invalid(absl::StrCat(mwhere, ": y=", m.y, " outside the image height ", record.height));
      }
      if (angle >= unit.units_per_circle) {
        return r.Invalid(absl::StrCat(mwhere, ": angle ", int{angle}, " outside 0..", unit.units_per_circle - 1));
      }
      if (q > 100) return r.Invalid(absl::StrCat(mwhere, ": quality ", int{q}, " outside 0..100"));
      m.angle = DecodeAngle(angle, unit);
      m.quality = q;
    }
    uint16_t ext_length = 0;
    TESSERA_RETURN_IF_ERROR(r.U16(absl::StrCat(where, " extended data block length"), &ext_length));
    TESSERA_RETURN_IF_ERROR(r.Need(ext_length, absl::StrCat(where, " extended data block")));
    size_t left = ext_length;
    while (left > 0) {
      const std::string awhere = absl::StrCat(where, " extended data area ", view.extended_data.size());
      if (left < 4) {
        return r.Invalid(absl::StrCat(awhere, ": ", left, " bytes left in the block, too few for an area header"));
      }
      uint16_t type_code = 0, area_length = 0;
      TESSERA_RETURN_IF_ERROR(r.U16("extended data type code", &type_code));
      TESSERA_RETURN_IF_ERROR(r.U16("extended data area length", &area_length));
      if (area_length < 4 || area_length > left) {
        return r.Invalid(absl::StrCat(awhere, ": area length ", area_length, " outside 4..", left,
                                      " (the bytes left in the extended data block)"));
      }
      ExtendedDataBlock block;
      block.type_code = type_code;
      TESSERA_RETURN_IF_ERROR(r.Bytes(area_length - 4, "extended data", &block.data));
      view.extended_data.push_back(std::move(block));
      left -= area_length;
    }
    views->push_back(std::move(view));
  }
  return absl::OkStatus();
}

size_t FingerViewsSize(const std::vector<Template>& views) {
  size_t n = 0;
  for (const Template& v : views) {
    n += 4 + 6 * v.minutiae.size() + 2;
    for (const ExtendedDataBlock& b : v.extended_data) n += 4 + b.data.size();
  }
  return n;
}

void WriteFingerViews(const std::vector<Template>& views, AngleUnit unit, ByteWriter& w) {
  for (const Template& v : views) {
    w.U8(v.finger_position);
    w.U8((v.view_number << 4) | v.impression_type);
    w.U8(v.finger_quality);
    w.U8(v.minutiae.size());
    for (const Minutia& m : v.minutiae) {
      w.U16((static_cast<uint32_t>(m.type) << 14) | static_cast<uint32_t>(m.x));
      w.U16(static_cast<uint32_t>(m.y));
      w.U8(EncodeAngle(m.angle, unit));
      w.U8(m.quality);
    }
    size_t ext = 0;
    for (const ExtendedDataBlock& b : v.extended_data) ext += 4 + b.data.size();
    w.U16(ext);
    for (const ExtendedDataBlock& b : v.extended_data) {
      w.U16(b.type_code);
      w.U16(4 + b.data.size());
      w.Bytes(b.data);
    }
  }
}


// Reads the format identifier and version shared by ISO and ANSI records.
absl::Status ReadFmrMagic(ByteReader& r) {
  std::string magic, version;
  TESSERA_RETURN_IF_ERROR(r.Bytes(4, "format identifier", &magic));
  if (magic != std::string("FMR\0", 4)) return r.Invalid("format identifier is not \"FMR\\0\"");
  TESSERA_RETURN_IF_ERROR(r.Bytes(4, "version", &version));
  if (version != std::string(" 20\0", 4)) {
    std::string printable;
    for (char c : version) printable += (c >= 0x20 && c < 0x7f) ? c : '?';
    return r.Invalid(absl::StrCat("unsupported version \"", printable, "\" (only \" 20\" is read)"));
  }
  return absl::OkStatus();
}

// Checks the record length field against the buffer.
absl::Status CheckRecordLength(const ByteReader& r, uint64_t declared, size_t buffer, size_t header) {
  if (declared < header) {
    return r.Invalid(absl::StrCat("record length field ", declared, " is smaller than the ", header, "-byte header"));
  }
  if (declared > buffer) {
    return absl::DataLossError(absl::StrCat(r.context(), ": record length field says ", declared,
                                            " bytes but the buffer holds ", buffer, " (truncated)"));
  }
  if (declared < buffer) {
    return r.Invalid(absl::StrCat(buffer - declared, " bytes follow the record (record length field says ", declared,
                                  ", buffer holds ", buffer, ")"));
  }
  return absl::OkStatus();
}

// Reads capture equipment .. reserved byte (the part of the header after the
// length and, for ANSI, the product id) into `record`; returns the view count.
absl::Status ReadFmrImageHeader(ByteReader& r, Template* record, int* num_views) {
  uint16_t equipment = 0, width = 0, height = 0, xres = 0, yres = 0;
  uint8_t views = 0, reserved = 0;
  TESSERA_RETURN_IF_ERROR(r.U16("capture equipment", &equipment));
  TESSERA_RETURN_IF_ERROR(r.U16("image width", &width));
  TESSERA_RETURN_IF_ERROR(r.U16("image height", &height));
  TESSERA_RETURN_IF_ERROR(r.U16("x resolution", &xres));
  TESSERA_RETURN_IF_ERROR(r.U16("y resolution", &yres));
  TESSERA_RETURN_IF_ERROR(r.U8("number of finger views", &views));
  TESSERA_RETURN_IF_ERROR(r.U8("reserved byte", &reserved));
  if (width == 0 || width > kMaxCoordinate) {
    return r.Invalid(absl::StrCat("image width ", width, " outside 1..", kMaxCoordinate));
  }
  if (height == 0 || height > kMaxCoordinate) {
    return r.Invalid(absl::StrCat("image height ", height, " outside 1..", kMaxCoordinate));
  }
  if (xres == 0) return r.Invalid("x resolution is 0");
  if (yres == 0) return r.Invalid("y resolution is 0");
  if (views == 0) return r.Invalid("number of finger views is 0");
  if (reserved != 0) return r.Invalid(absl::StrCat("reserved header byte is ", int{reserved}, ", not 0"));
  record->capture_equipment = equipment;
  record->width = width;
  record->height = height;
  record->x_resolution = xres;
  record->y_resolution = yres;
  *num_views = views;
  return absl::OkStatus();
}

void WriteFmrImageHeader(const Template& v, size_t num_views, ByteWriter& w) {
  w.U16(v.capture_equipment);
  w.U16(v.width);
  w.U16(v.height);
  w.U16(v.x_resolution);
  w.U16(v.y_resolution);
  w.U8(num_views);
  w.U8(0);
}

absl::StatusOr<std::vector<Template>> ReadFmrImageAndViews(ByteReader& r, Template record, AngleUnit unit) {
  int num_views = 0;
  TESSERA_RETURN_IF_ERROR(ReadFmrImageHeader(r, &record, &num_views));
  std::vector<Template> views;
  TESSERA_RETURN_IF_ERROR(ReadFingerViews(r, num_views, record, unit, &views));
  if (r.remaining() != 0) {
    return r.Invalid(absl::StrCat(r.remaining(), " bytes after the last finger view"));
  }
  return views;
}

void WriteFmrMagic(ByteWriter& w) {
  w.Bytes(absl::string_view("FMR\0", 4));
  w.Bytes(absl::string_view(" 20\0", 4));
}

void WriteFmrImageAndViews(const std::vector<Template>& views, AngleUnit unit, ByteWriter& w) {
  WriteFmrImageHeader(views[0], views.size(), w);
  WriteFingerViews(views, unit, w);
}

}  // namespace internal
}  // namespace fingerprint
}  // namespace tessera
