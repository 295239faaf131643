// ISO/IEC 19794-2:2005 finger minutiae records ("FMR\0", version " 20\0").
//
// Layout (big-endian): format identifier (4), version (4), record length (4,
// the whole record), capture equipment compliance/id (2), image width and
// height in pixels (2 + 2), x and y resolution in pixels per cm (2 + 2),
// number of finger views (1), reserved (1, zero); then the finger views of
// fmr_views.h with angles in units of 1/256 circle (1.40625 degrees).
//
// Parsing is strict: the record length field must equal the buffer size (a
// shorter buffer is DATA_LOSS, trailing bytes INVALID_ARGUMENT), counts must
// fit the record, coordinates must lie inside the declared image, reserved
// bits must be zero, extended data areas must tile their block exactly.
// Every other inconsistency is INVALID_ARGUMENT naming the field.
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_ISO19794_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_ISO19794_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "services/fingerprint/formats/template.h"

namespace tessera {
namespace fingerprint {

inline constexpr int kIso19794HeaderBytes = 24;

// All finger views of the record (at least one).
absl::StatusOr<std::vector<Template>> ParseIso19794(absl::Span<const uint8_t> bytes);

// Writes one record holding `views` (validated first; cbeff_product_id is not
// part of this format and is dropped). Angles round to the nearest 1/256 turn.
absl::StatusOr<std::vector<uint8_t>> WriteIso19794(const std::vector<Template>& views);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_ISO19794_H_
