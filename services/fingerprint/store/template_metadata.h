// Whose finger an enrolled template is, in ANSI/NIST-ITL terms: the subject,
// the finger position (FGP), the impression type (IMP), the capture date, the
// transaction it came from (TCN) and free key/values. Stored with the template
// in the gallery (gallery_store.h), returned with candidates, filtered on in
// searches (TemplateFilter) and deleted with the subject.
//
// Durable encoding (a block appended to a template's enroll fields; version 1):
//   u8 version | u16 len, subject | u8 finger position | i16 impression type
//   | u16 len, capture date | u16 len, source TCN | u16 n | n x (u16 len, key,
//   u32 len, value)
// little endian, as the rest of the gallery format.
#ifndef TESSERA_SERVICES_FINGERPRINT_STORE_TEMPLATE_METADATA_H_
#define TESSERA_SERVICES_FINGERPRINT_STORE_TEMPLATE_METADATA_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tessera {
namespace fingerprint {

inline constexpr int kMaxSubjectIdLength = 256;
inline constexpr int kMaxSourceTcnLength = 64;
inline constexpr int kMaxMetadataAttributes = 32;
inline constexpr int kMaxAttributeKeyLength = 64;
inline constexpr int kMaxAttributeValueLength = 1024;
inline constexpr int kUnknownImpressionType = -1;

struct TemplateMetadata {
  std::string subject_id;      // empty: no subject
  int finger_position = 0;     // FGP 0-255 (0: unknown finger; 1-10 the ten fingers)
  int impression_type = kUnknownImpressionType;  // IMP 0-255, or -1: not given
  std::string capture_date;    // "YYYY-MM-DD" or empty
  std::string source_tcn;      // the transaction control number (1.009) it came from
  // Free key/values, sorted by key, keys unique (NormalizeAttributes).
  std::vector<std::pair<std::string, std::string>> attributes;

  bool empty() const {
    return subject_id.empty() && finger_position == 0 && impression_type == kUnknownImpressionType &&
           capture_date.empty() && source_tcn.empty() && attributes.empty();
  }
  bool operator==(const TemplateMetadata& o) const {
    return subject_id == o.subject_id && finger_position == o.finger_position &&
           impression_type == o.impression_type && capture_date == o.capture_date && source_tcn == o.source_tcn &&
           attributes == o.attributes;
  }
  bool operator!=(const TemplateMetadata& o) const { return !(*this == o); }
};

// INVALID_ARGUMENT naming the field: a subject id or TCN too long or with
// control characters, a finger position or impression type out of range, a
// capture date that is not a calendar date "YYYY-MM-DD", too many attributes,
// an empty, long or repeated key, a long value. Attributes must be sorted
// (NormalizeAttributes does it).
absl::Status ValidateTemplateMetadata(const TemplateMetadata& m);

// Sorts the attributes by key; INVALID_ARGUMENT for a repeated key.
absl::Status NormalizeAttributes(std::vector<std::pair<std::string, std::string>>* attributes);

// "YYYY-MM-DD" from "YYYY-MM-DD" or ANSI/NIST's "YYYYMMDD" (field 1.005);
// INVALID_ARGUMENT for anything else or an impossible date.
absl::Status NormalizeCaptureDate(absl::string_view date, std::string* out);

// The durable block (see above).
void AppendMetadataBlock(const TemplateMetadata& m, std::string* out);
// Reads a block at data[*pos], advancing *pos; false when malformed or cut.
bool ReadMetadataBlock(absl::string_view data, size_t* pos, TemplateMetadata* out);

// Which templates a search may return (both lists empty: all). A template
// passes when its finger position is in finger_positions (or that list is
// empty) and its impression type in impression_types (or that list is empty).
struct TemplateFilter {
  std::vector<int> finger_positions;
  std::vector<int> impression_types;

  bool empty() const { return finger_positions.empty() && impression_types.empty(); }
  bool Accepts(int finger_position, int impression_type) const;
  bool Accepts(const TemplateMetadata& m) const { return Accepts(m.finger_position, m.impression_type); }
  // A canonical text form (sorted, deduplicated): searches with equal keys
  // may share a batch.
  std::string Key() const;
};

// INVALID_ARGUMENT for a code outside 0-255 (or -1 for impression types)
// or more than 256 entries in a list.
absl::Status ValidateTemplateFilter(const TemplateFilter& f);

// The standard's name of a finger position code ("right thumb", "left
// little", "unknown", "plain right four fingers", ...); "FGP <n>" otherwise.
std::string FingerPositionName(int fgp);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_STORE_TEMPLATE_METADATA_H_
