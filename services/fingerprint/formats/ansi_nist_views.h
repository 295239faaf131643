// Typed views of an ANSI/NIST-ITL transaction (ansi_nist.h): the friction
// ridge images (Type-4, 13, 14, 15) and the Type-9 minutiae, legacy NIST
// standard (9.010-9.012) and EFS (9.300, 9.331), and their conversion to the
// repository's Template (template.h). ParseTransaction already ran these
// checks, so on a parsed transaction they fail only if it was edited since.
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_VIEWS_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_VIEWS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "services/fingerprint/formats/ansi_nist.h"
#include "services/fingerprint/formats/template.h"

namespace tessera {
namespace fingerprint {
namespace ansi_nist {

enum class Compression { kNone, kWsq, kJpeg, kJpegLossless, kJpeg2000, kJpeg2000Lossless, kPng, kOther };
absl::string_view CompressionName(Compression c);  // "none", "wsq", "jpeg", ...

struct ImageView {
  int record_type = 0;
  int record_index = 0;  // 1-based position in the file
  int idc = 0;
  std::vector<int> positions;  // FGP (Type-4: the used ones of its 6 bytes); palm codes for Type-15
  int impression_type = 0;     // IMP
  // Pixels per inch: Type-4 from ISR (0: Type-1 NSR, 1: NTR, in pixels/mm
  // x 25.4); tagged records from SLC/THPS (1: per inch, 2: per cm x 2.54).
  // 0 when the file gives none (SLC 0, NSR 00.00).
  double ppi = 0;
  int width = 0;   // HLL
  int height = 0;  // VLL
  int bits_per_pixel = 8;  // BPX (Type-4: 8)
  Compression compression = Compression::kNone;
  std::string compression_code;  // as written: "WSQ20", "1", ...
  absl::string_view data;        // the image bytes, inside the Transaction
};

// Every image record, in file order. INVALID_ARGUMENT naming record and
// field for a missing or malformed HLL, VLL, CGA/GCA, FGP, IMP, SLC/THPS or
// image field.
absl::StatusOr<std::vector<ImageView>> Images(const Transaction& t);

// One minutia of the legacy NIST standard format (9.012 MRC subfield).
// Units as written: x and y in 0.01 mm with the origin at the image's
// BOTTOM-left (y grows upwards), theta in whole degrees counterclockwise
// from +x pointing AWAY from the ridge ending / bifurcation valley (NBIS
// mindtct's to_type9.c writes y = H - 1 - y_top and theta = 270 - its own
// direction: the NIST convention, 180 degrees from ISO/ANSI 378).
struct LegacyMinutia {
  int index = 0;          // item 1
  int x = 0, y = 0;       // item 2 "XXXXYYYYTTT"
  int theta = 0;          // degrees 0-359
  int quality = 0;        // item 3: 0 manual, 1 unknown, 2 (best) - 63
  char type = 'D';        // item 4: A ending, B bifurcation, C compound, D undetermined
  std::vector<std::string> ridge_counts;  // items 5..: "neighbour,count"
};

// One EFS minutia (9.331 MIN subfield). x and y in units of 10 micrometres
// (0.01 mm) from the TOP-left of the EFS region of interest (9.300: the
// sample file's minutiae all lie inside the ROI's size while its offset is
// 3661), theta in whole degrees counterclockwise from +x, the ISO/ANSI 378
// direction; type E ending, B bifurcation, X undetermined.
struct EfsMinutia {
  int x = 0, y = 0;
  int theta = 0;  // 0-360: NIST's own sample writes 360 for 0
  char type = 'X';
};

struct MinutiaeView {
  int record_index = 0;
  int idc = 0;
  int impression_type = 0;  // 9.003
  std::string format;       // 9.004 FMT: "S" standard, "U" user-defined
  // Legacy fields: present when 9.010 is.
  bool has_legacy = false;
  int declared_count = 0;  // 9.010 MIN (equals legacy.size(): checked)
  std::vector<LegacyMinutia> legacy;
  // EFS (ANSI/NIST-ITL 1-2011 Extended Feature Set).
  bool has_roi = false;  // 9.300 ROI: size and offset in 10 um units
  int roi_width = 0, roi_height = 0, roi_x = 0, roi_y = 0;
  bool has_efs = false;  // 9.331 present
  std::vector<EfsMinutia> efs;
};

// Every Type-9 record, in file order.
absl::StatusOr<std::vector<MinutiaeView>> Minutiae(const Transaction& t);

struct TemplateOptions {
  // Override the geometry that would come from the image record with the
  // same IDC (or the Type-1 NSR): 0 = take it from the transaction.
  double ppi = 0;
  int image_height = 0;  // legacy minutiae need it to flip y
  int image_width = 0;
};

// The minutiae of `m` as a Template, in pixels at the image's resolution:
//   legacy: x_px = round(x * ppi / 2540), y_px = H - 1 - round(y * ppi / 2540)
//           (y measured up from the bottom), angle = theta + 180 degrees;
//   EFS:    x_px = round((roi_x + x) * ppi / 2540), likewise y from the top,
//           angle = theta.
// EFS minutiae are used when present, else the legacy ones. Types: A/E
// ending, B bifurcation, others kOther; legacy quality 2..63 maps to
// 100..0 linearly (0/1: 0, "not reported"). The ppi and height come from
// the image record with the same IDC, else from the options / the Type-1 NSR.
// FAILED_PRECONDITION when the resolution (or, for legacy minutiae, the
// image height) is unknown; INVALID_ARGUMENT when a minutia falls outside
// the image.
absl::StatusOr<Template> MinutiaeTemplate(const Transaction& t, const MinutiaeView& m,
                                          const TemplateOptions& options = {});

}  // namespace ansi_nist
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_VIEWS_H_
