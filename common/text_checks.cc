#include "common/text_checks.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera {
namespace {

// Decodes one UTF-8 sequence at text[i]; returns its length (0: invalid).
size_t DecodeUtf8(absl::string_view text, size_t i, uint32_t* cp) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(text[i + k]); };
  const uint8_t c = b(0);
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t n = 0;
  uint32_t v = 0, min = 0;
  if ((c & 0xE0) == 0xC0) {
    n = 2, v = c & 0x1F, min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, v = c & 0x0F, min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, v = c & 0x07, min = 0x10000;
  } else {
    return 0;
  }
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(k) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;  // overlong, out of range, surrogate
  *cp = v;
  return n;
}

const char* Forbidden(uint32_t cp) {
  if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) return "a control character";
  if (cp == 0x061C || cp == 0x200E || cp == 0x200F || (cp >= 0x202A && cp <= 0x202E) ||
      (cp >= 0x2066 && cp <= 0x2069)) {
    return "a bidirectional formatting character";
  }
  if (cp == 0x2028 || cp == 0x2029) return "a line or paragraph separator";
  if ((cp >= 0x200B && cp <= 0x200D) || cp == 0x2060 || cp == 0xFEFF) return "a zero-width character";
  return nullptr;
}

}  // namespace

absl::Status CheckIdentifierText(absl::string_view text, absl::string_view what) {
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = DecodeUtf8(text, i, &cp);
    if (n == 0) return absl::InvalidArgumentError(absl::StrCat(what, " is not valid UTF-8 at byte ", i));
    if (const char* why = Forbidden(cp)) {
      return absl::InvalidArgumentError(absl::StrFormat("%s contains U+%04X (%s) at byte %d", what, cp, why, i));
    }
    i += n;
  }
  return absl::OkStatus();
}

std::string QuoteBounded(absl::string_view text, size_t max_bytes) {
  const absl::string_view shown = text.substr(0, max_bytes);
  std::string out = "'";
  for (char ch : shown) {
    const uint8_t c = static_cast<uint8_t>(ch);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(ch);
    } else {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    }
  }
  out.push_back('\'');
  if (shown.size() < text.size()) absl::StrAppend(&out, "... (", text.size(), " bytes)");
  return out;
}

}  // namespace tessera
