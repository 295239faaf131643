// ANSI/INCITS 378-2004 finger minutiae records ("FMR\0", version " 20\0").
//
// Differences from ISO/IEC 19794-2:2005 (template_iso19794.h):
//   * the record length is 2 bytes, or, for records over 65535 bytes, 2 zero
//     bytes followed by a 4-byte length;
//   * a 4-byte CBEFF product identifier (owner 2, type 2) follows the length;
//   * minutia angles are in units of 2 degrees, 0..179.
// So the header is 26 bytes (30 with the long length). The views, minutiae
// and extended data are laid out as in ISO (fmr_views.h). Validation is as
// strict as for ISO.
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_ANSI378_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_ANSI378_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "services/fingerprint/formats/template.h"

namespace tessera {
namespace fingerprint {

absl::StatusOr<std::vector<Template>> ParseAnsi378(absl::Span<const uint8_t> bytes);

// Uses the 2-byte length when the record fits in 65535 bytes. Angles round to
// the nearest 2 degrees.
absl::StatusOr<std::vector<uint8_t>> WriteAnsi378(const std::vector<Template>& views);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_ANSI378_H_
