// Template format detection, format-independent parse/write, and files.
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_IO_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_IO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "services/fingerprint/formats/template.h"
#include "services/fingerprint/formats/template_xyt.h"

namespace tessera {
namespace fingerprint {

enum class TemplateFormat { kUnknown, kIso19794, kAnsi378, kXyt };

// "iso19794-2:2005", "ansi378-2004", "xyt", "unknown".
absl::string_view TemplateFormatName(TemplateFormat format);
// Accepts "iso", "ansi", "xyt" and the full names above.
absl::StatusOr<TemplateFormat> ParseTemplateFormatName(absl::string_view name);

// Guesses the format from the first bytes, without validating the record.
// "FMR\0" records: ISO and ANSI share magic and version; they are told apart
// by the length field at byte 8 (ISO: 4 bytes, ANSI: 2 bytes, or 0x0000 and
// 4 bytes for long records). Bytes 8-9 are zero in an ISO record under 64 KiB
// and in a long ANSI record; then bytes 10-11 are the ISO length (>= 24) or
// the high half of the ANSI length (< 24 for any record ANSI can hold). The
// rule does not depend on the buffer size, so a truncated record is still
// recognised (and then rejected by its parser with DATA_LOSS).
// Printable ASCII text (digits, signs, whitespace, '#' comments) is kXyt.
TemplateFormat SniffTemplateFormat(absl::Span<const uint8_t> bytes);

// Sniffs and parses. xyt text yields one view; `xyt` supplies what the text
// lacks (image size, convention). Unrecognised bytes are INVALID_ARGUMENT.
absl::StatusOr<std::vector<Template>> ParseTemplateRecord(absl::Span<const uint8_t> bytes,
                                                          const XytOptions& xyt = {});
// Parses as the given format (no sniffing; kUnknown sniffs). An empty input is
// a valid xyt text with no minutiae but is not recognised by sniffing.
absl::StatusOr<std::vector<Template>> ParseTemplateRecordAs(TemplateFormat format, absl::Span<const uint8_t> bytes,
                                                            const XytOptions& xyt = {});
// Writes `views` in `format` (xyt: exactly one view).
absl::StatusOr<std::vector<uint8_t>> WriteTemplateRecord(TemplateFormat format, const std::vector<Template>& views,
                                                         const XytOptions& xyt = {});

// Files up to 32 MiB. Errors name the path.
absl::StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path);
absl::StatusOr<std::vector<Template>> ReadTemplateFile(const std::string& path, const XytOptions& xyt = {});

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_TEMPLATE_IO_H_
