// NIST .xyt minutiae text: one minutia per line, "x y theta" or
// "x y theta quality", integers separated by spaces or tabs, theta in degrees
// counterclockwise. There is no header: image size, resolution and minutia
// types are not represented (types read as kOther; size comes from
// XytOptions or, when unknown, from the largest coordinate).
//
// Two coordinate conventions exist, because NIST's mindtct writes two:
//   * kTopLeft (our default): origin at the top-left pixel, y down, theta
//     exactly as in ISO/ANSI (template.h), in degrees. Lossless apart from
//     rounding theta to whole degrees. NIST 5.0.0's mindtct -m1 also puts
//     the origin top-left but writes theta in 2-degree units (0-179): such
//     files need their theta doubled first (checked 2026-12-06,
//     bench/results/2026-12-06-nbis-mindtct-vs-tessera-extractor.md).
//   * kNist (mindtct without -m1, the input Bozorth3 traditionally reads):
//     origin at the bottom-left, y_file = height - y, and theta turned by
//     180 degrees: theta_file = (angle_in_degrees + 180) mod 360. Converting
//     needs the image height (XytOptions::height).
// Blank lines and lines starting with '#' are skipped. All lines must have
// the same number of fields; x and y are 0..16383 and inside the image when
// its size is given, theta 0..359, quality 0..100, at most 255 lines of
// minutiae. Anything else is INVALID_ARGUMENT naming the line and field.
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_XYT_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_XYT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/fingerprint/formats/template.h"

namespace tessera {
namespace fingerprint {

enum class XytConvention { kTopLeft, kNist };

struct XytOptions {
  XytConvention convention = XytConvention::kTopLeft;
  // Image size in pixels. Reading: 0 = unknown, then the template gets
  // max(x)+1 by max(y)+1 (kNist needs the height). Ignored when writing (the
  // template's own size is used).
  int width = 0;
  int height = 0;
  int x_resolution = 197;  // pixels per cm given to templates read from text
  int y_resolution = 197;
  bool write_quality = true;  // writing: emit the fourth column
};

absl::StatusOr<Template> ParseXyt(absl::string_view text, const XytOptions& options = {});
absl::StatusOr<std::string> WriteXyt(const Template& view, const XytOptions& options = {});

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_XYT_H_
