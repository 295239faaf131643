// Finger views of "FMR" minutiae records, the part ISO/IEC 19794-2:2005 and
// ANSI/INCITS 378-2004 share (internal to services/fingerprint):
//   per view: finger position (1 byte), view number (4 bits) | impression
//   type (4 bits), finger quality (1), minutia count (1); then 6 bytes per
//   minutia: type (2 bits) | x (14 bits), reserved (2 bits, zero) | y
//   (14 bits), angle (1), quality (1); then the extended data block: its
//   length (2 bytes, 0 = none) and areas of type code (2), area length
//   (2, counting this 4-byte header) and data.
// The formats differ in the record header and the angle unit only.
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_FMR_VIEWS_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_FMR_VIEWS_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "services/fingerprint/formats/byte_io.h"
#include "services/fingerprint/formats/template.h"

namespace tessera {
namespace fingerprint {
namespace internal {

struct AngleUnit {
  int units_per_circle;  // 256 (ISO: 1.40625 degrees) or 180 (ANSI: 2 degrees)
};

// Nearest unit, wrapped into 0..units_per_circle-1.
int EncodeAngle(double radians, AngleUnit unit);
double DecodeAngle(int units, AngleUnit unit);

// Reads `num_views` views; each starts as a copy of `record`, which holds the
// record-level fields of the header only (no minutiae, no per-view fields).
absl::Status ReadFingerViews(ByteReader& reader, int num_views, const Template& record, AngleUnit unit,
                             std::vector<Template>* views);
// Writes the views (already validated).
void WriteFingerViews(const std::vector<Template>& views, AngleUnit unit, ByteWriter& writer);
// Bytes WriteFingerViews produces.
size_t FingerViewsSize(const std::vector<Template>& views);

// Record header pieces shared by ISO and ANSI (template_iso19794.cc):
// "FMR\0" and " 20\0"; the record length field against the buffer (DATA_LOSS
// when the buffer is shorter, INVALID_ARGUMENT when longer or below the
// header size); capture equipment .. reserved byte.
absl::Status ReadFmrMagic(ByteReader& reader);
absl::Status CheckRecordLength(const ByteReader& reader, uint64_t declared, size_t buffer, size_t header);
absl::Status ReadFmrImageHeader(ByteReader& reader, Template* record, int* num_views);
void WriteFmrImageHeader(const Template& view, size_t num_views, ByteWriter& writer);

// What follows the format-specific header fields, read and written the same
// way by both formats: the image header (into a copy of `record`, which holds
// the fields read before it), the finger views, and nothing after them.
absl::StatusOr<std::vector<Template>> ReadFmrImageAndViews(ByteReader& reader, Template record, AngleUnit unit);
void WriteFmrMagic(ByteWriter& writer);
void WriteFmrImageAndViews(const std::vector<Template>& views, AngleUnit unit, ByteWriter& writer);

}  // namespace internal
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_FMR_VIEWS_H_
