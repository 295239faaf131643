// Fingerprint minutiae templates: the in-memory form every template format
// (ISO/IEC 19794-2:2005, ANSI/INCITS 378-2004, NIST .xyt) reads into and
// writes from, and the checks every writer applies.
//
// Coordinates and angles follow ISO/IEC 19794-2 (and ANSI 378, which agrees):
//   * x is the pixel column (0 = left edge), y the pixel row (0 = top edge,
//     y grows downwards), both integers within the declared image size;
//   * angle is in radians, in [0, 2*pi), measured counterclockwise from the
//     +x axis *as the image is displayed* (so 90 degrees points to the top of
//     the image, i.e. towards -y). The unit direction of a minutia in pixel
//     coordinates is therefore (cos(angle), -sin(angle)).
// Readers convert from each format's own units (ISO: 1/256 of a circle, ANSI:
// 2 degrees, xyt: degrees, NIST xyt: bottom-left origin and a direction
// turned by 180 degrees); writers round to the nearest representable value.
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tessera {
namespace fingerprint {

// Two-bit type codes of ISO 19794-2 / ANSI 378 (01 ending, 10 bifurcation,
// 00 other; 11 is reserved and rejected).
enum class MinutiaType : uint8_t { kOther = 0, kEnding = 1, kBifurcation = 2 };
absl::string_view MinutiaTypeName(MinutiaType type);

struct Minutia {
  int x = 0;         // pixel column
  int y = 0;         // pixel row (top = 0)
  double angle = 0;  // radians in [0, 2*pi), counterclockwise on the displayed image
  MinutiaType type = MinutiaType::kOther;
  int quality = 0;  // 0-100; 0 = not reported
  bool operator==(const Minutia& o) const {
    return x == o.x && y == o.y && angle == o.angle && type == o.type && quality == o.quality;
  }
};

// An extended data area of an ISO/ANSI finger view (ridge counts, cores and
// deltas, vendor data): kept opaque so a record survives a round trip.
struct ExtendedDataBlock {
  uint16_t type_code = 0;
  std::string data;  // the area's bytes after its 4-byte header
  bool operator==(const ExtendedDataBlock& o) const { return type_code == o.type_code && data == o.data; }
};

// One finger view. A record of several views repeats the record-level fields
// (image size, resolution, capture equipment, product id) in each view.
struct Template {
  int width = 0;   // image size in pixels (1..16383: minutia coordinates are 14-bit)
  int height = 0;
  int x_resolution = 197;  // pixels per centimetre (197 = 500 dpi)
  int y_resolution = 197;
  uint16_t capture_equipment = 0;  // compliance (top 4 bits) and equipment id (12 bits)
  uint32_t cbeff_product_id = 0;   // ANSI 378 only (owner << 16 | type); 0 elsewhere
  int finger_position = 0;         // 0 unknown, 1-10 (right thumb .. left little)
  int view_number = 0;             // 0-15
  int impression_type = 0;         // 0-15 (0 live-scan plain, 1 rolled, ...)
  int finger_quality = 0;          // 0-100
  std::vector<Minutia> minutiae;
  std::vector<ExtendedDataBlock> extended_data;
};

// Limits shared by the binary formats.
inline constexpr int kMaxCoordinate = 16383;  // 14-bit x and y
inline constexpr int kMaxMinutiaePerView = 255;
inline constexpr int kMaxViewsPerRecord = 255;

// Maps any finite angle to [0, 2*pi).
double NormalizeAngle(double radians);

// Checks what every writer needs: image size 1..16383, resolutions 1..65535,
// finger position 0-10, view number and impression type 0-15, finger
// quality 0-100, at most 255 minutiae, each inside the image with a finite
// angle, a valid type and quality 0-100, extended data that fits its 16-bit
// length fields. INVALID_ARGUMENT naming the field otherwise.
absl::Status ValidateTemplate(const Template& view);

// Views of one record must agree on the record-level fields.
absl::Status ValidateRecordViews(const std::vector<Template>& views);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_H_
