// Checks and quoting for text that comes from clients (template ids, paths,
// names) and ends up in evidence (galleries, audit trails) or in error
// messages.
//
// CheckIdentifierText rejects what renders misleadingly or breaks log lines:
// invalid UTF-8, C0 and C1 control characters (U+0000-U+001F, U+007F-U+009F,
// e.g. U+0085 NEXT LINE), the bidirectional formatting characters (U+061C,
// U+200E, U+200F, U+202A-U+202E, U+2066-U+2069: "Trojan Source"), the line
// and paragraph separators U+2028/U+2029, and zero-width characters (U+200B-
// U+200D, U+2060, U+FEFF) that make two ids look the same. The message names
// the code point and its byte offset, never the text.
//
// QuoteBounded is what an error message may echo of a client's input: at most
// `max_bytes` of it, non-printable bytes hex-escaped, with the full length
// when cut (a 10 KB path must not make the status exceed gRPC's metadata
// limit and hide the real error).
#ifndef TESSERA_COMMON_TEXT_CHECKS_H_
#define TESSERA_COMMON_TEXT_CHECKS_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tessera {

// OK, or INVALID_ARGUMENT "<what> contains U+202E (a bidirectional
// formatting character) at byte 3".
absl::Status CheckIdentifierText(absl::string_view text, absl::string_view what);

// "'abc'" or "'abcd...' (10240 bytes)"; bytes outside printable ASCII as \xNN.
std::string QuoteBounded(absl::string_view text, size_t max_bytes = 80);

}  // namespace tessera

#endif  // TESSERA_COMMON_TEXT_CHECKS_H_
