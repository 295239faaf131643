#include "services/fingerprint/formats/template.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace tessera {
namespace fingerprint {

absl::string_view MinutiaTypeName(MinutiaType type) {
  switch (type) {
    case MinutiaType::kOther:
      return "other";
    case MinutiaType::kEnding:
      return "ending";
    case MinutiaType::kBifurcation:
      return "bifurcation";
  }
  return "invalid";
}

double NormalizeAngle(double radians) {
  constexpr double kTwoPi = 2.0 * M_PI;
  double a = std::fmod(radians, kTwoPi);
  if (a < 0) a += kTwoPi;
  if (a >= kTwoPi) a = 0;  // fmod of a tiny negative value rounds up to 2*pi
  return a;
}

absl::Status ValidateTemplate(const Template& v) {
  auto bad = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat("template: ", parts...)); };
  if (v.width < 1 || v.width > kMaxCoordinate) return bad("image width ", v.width, " outside 1..", kMaxCoordinate);
  if (v.height < 1 || v.height > kMaxCoordinate) return bad("image height ", v.height, " outside 1..", kMaxCoordinate);
  if (v.x_resolution < 1 || v.x_resolution > 65535) return bad("x resolution ", v.x_resolution, " outside 1..65535");
  if (v.y_resolution < 1 || v.y_resolution > 65535) return bad("y resolution ", v.y_resolution, " outside 1..65535");
  if (v.finger_position < 0 || v.finger_position > 10) return bad("finger position ", v.finger_position, " outside 0..10");
  if (v.view_number < 0 || v.view_number > 15) return bad("view number ", v.view_number, " outside 0..15");
  if (v.impression_type < 0 || v.impression_type > 15) return bad("impression type ", v.impression_type, " outside 0..15");
  if (v.finger_quality < 0 || v.finger_quality > 100) return bad("finger quality ", v.finger_quality, " outside 0..100");
  if (v.minutiae.size() > kMaxMinutiaePerView) {
    return bad(v.minutiae.size(), " minutiae (a view holds at most ", kMaxMinutiaePerView, ")");
  }
  for (size_t i = 0; i < v.minutiae.size(); ++i) {
    const Minutia& m = v.minutiae[i];
    if (m.x < 0 || m.x >= v.width) return bad("minutia ", i, " x=", m.x, " outside the image width ", v.width);
    if (m.y < 0 || m.y >= v.height) return bad("minutia ", i, " y=", m.y, " outside the image height ", v.height);
    if (!std::isfinite(m.angle)) return bad("minutia ", i, " angle is not finite");
    if (m.type != MinutiaType::kOther && m.type != MinutiaType::kEnding && m.type != MinutiaType::kBifurcation) {
      return bad("minutia ", i, " type code ", static_cast<int>(m.type), " is not a minutia type");
    }
    if (m.quality < 0 || m.quality > 100) return bad("minutia ", i, " quality ", m.quality, " outside 0..100");
  }
  size_t ext_total = 0;
  for (size_t i = 0; i < v.extended_data.size(); ++i) {
    const size_t area = v.extended_data[i].data.size() + 4;
    if (area > 65535) return bad("extended data area ", i, " of ", area, " bytes exceeds 65535");
    ext_total += area;
  }
  if (ext_total > 65535) return bad("extended data of ", ext_total, " bytes exceeds the 16-bit block length");
  return absl::OkStatus();
}

absl::Status ValidateRecordViews(const std::vector<Template>& views) {
  if (views.empty()) return absl::InvalidArgumentError("template record: no finger views to write");
  if (views.size() > kMaxViewsPerRecord) {
    return absl::InvalidArgumentError(
        absl::StrCat("template record: ", views.size(), " finger views (at most ", kMaxViewsPerRecord, ")"));
  }
  for (size_t i = 0; i < views.size(); ++i) {
    const absl::Status s = ValidateTemplate(views[i]);
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat("view ", i, ": ", s.message()));
    const Template& a = views[0];
    const Template& b = views[i];
    if (a.width != b.width || a.height != b.height || a.x_resolution != b.x_resolution ||
        a.y_resolution != b.y_resolution || a.capture_equipment != b.capture_equipment ||
        a.cbeff_product_id != b.cbeff_product_id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "template record: view ", i,
          " disagrees with view 0 on a record-level field (image size, resolution, capture equipment, product id)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace fingerprint
}  // namespace tessera
