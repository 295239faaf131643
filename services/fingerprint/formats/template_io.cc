#include "services/fingerprint/formats/template_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/fingerprint/formats/template_ansi378.h"
#include "services/fingerprint/formats/template_iso19794.h"

namespace tessera {
namespace fingerprint {

namespace {
constexpr size_t kMaxFileBytes = size_t{32} << 20;
}  // namespace

absl::string_view TemplateFormatName(TemplateFormat format) {
  switch (format) {
    case TemplateFormat::kIso19794:
      return "iso19794-2:2005";
    case TemplateFormat::kAnsi378:
      return "ansi378-2004";
    case TemplateFormat::kXyt:
      return "xyt";
    case TemplateFormat::kUnknown:
      break;
  }
  return "unknown";
}

absl::StatusOr<TemplateFormat> ParseTemplateFormatName(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "iso" || n == "iso19794" || n == "iso19794-2" || n == "iso19794-2:2005") return TemplateFormat::kIso19794;
  if (n == "ansi" || n == "ansi378" || n == "ansi378-2004") return TemplateFormat::kAnsi378;
  if (n == "xyt") return TemplateFormat::kXyt;
  return absl::InvalidArgumentError(absl::StrCat("unknown template format \"", name, "\" (want iso, ansi or xyt)"));
}

TemplateFormat SniffTemplateFormat(absl::Span<const uint8_t> b) {
  if (b.empty()) return TemplateFormat::kUnknown;
  if (b.size() >= 3 && b[0] == 'F' && b[1] == 'M' && b[2] == 'R') {
    if (b.size() < 12) return TemplateFormat::kIso19794;  // too short to tell; the parser reports it
    const unsigned hi = (b[8] << 8) | b[9];
    const unsigned next = (b[10] << 8) | b[11];
    if (hi == 0) return next >= 24 ? TemplateFormat::kIso19794 : TemplateFormat::kAnsi378;
    return hi >= 26 ? TemplateFormat::kAnsi378 : TemplateFormat::kIso19794;  // ISO over 64 KiB: hi < 24
  }
  for (uint8_t c : b) {
    const bool text = (c >= 0x20 && c < 0x7f) || c == '\n' || c == '\r' || c == '\t' || c == '\v' || c == '\f';
    if (!text) return TemplateFormat::kUnknown;
  }
  return TemplateFormat::kXyt;
}

absl::StatusOr<std::vector<Template>> ParseTemplateRecord(absl::Span<const uint8_t> bytes, const XytOptions& xyt) {
  return ParseTemplateRecordAs(TemplateFormat::kUnknown, bytes, xyt);
}

absl::StatusOr<std::vector<Template>> ParseTemplateRecordAs(TemplateFormat format, absl::Span<const uint8_t> bytes,
                                                            const XytOptions& xyt) {
  if (format == TemplateFormat::kUnknown) format = SniffTemplateFormat(bytes);
  switch (format) {
    case TemplateFormat::kIso19794:
      return ParseIso19794(bytes);
    case TemplateFormat::kAnsi378:
      return ParseAnsi378(bytes);
    case TemplateFormat::kXyt: {
      TESSERA_ASSIGN_OR_RETURN(
          Template t, ParseXyt(absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), xyt));
      return std::vector<Template>{std::move(t)};
    }
    case TemplateFormat::kUnknown:
      break;
  }
  if (bytes.empty()) return absl::InvalidArgumentError("template: empty input");
  return absl::InvalidArgumentError(
      "template: not an ISO 19794-2 or ANSI 378 record (no \"FMR\" identifier) and not xyt text");
}

absl::StatusOr<std::vector<uint8_t>> WriteTemplateRecord(TemplateFormat format, const std::vector<Template>& views,
                                                         const XytOptions& xyt) {
  switch (format) {
    case TemplateFormat::kIso19794:
      return WriteIso19794(views);
    case TemplateFormat::kAnsi378:
      return WriteAnsi378(views);
    case TemplateFormat::kXyt: {
      if (views.size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat("xyt holds exactly one view, got ", views.size()));
      }
      TESSERA_ASSIGN_OR_RETURN(std::string text, WriteXyt(views[0], xyt));
      return std::vector<uint8_t>(text.begin(), text.end());
    }
    case TemplateFormat::kUnknown:
      break;
  }
  return absl::InvalidArgumentError("WriteTemplateRecord: no format given");
}

absl::StatusOr<std::vector<uint8_t>> ReadFileBytes(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    const std::string msg = absl::StrCat(path, ": ", std::strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  std::vector<uint8_t> bytes;
  uint8_t buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    bytes.insert(bytes.end(), buf, buf + n);
    if (bytes.size() > kMaxFileBytes) {
      std::fclose(f);
      return absl::InvalidArgumentError(absl::StrCat(path, ": larger than ", kMaxFileBytes, " bytes"));
    }
  }
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return bytes;
}

absl::StatusOr<std::vector<Template>> ReadTemplateFile(const std::string& path, const XytOptions& xyt) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, ReadFileBytes(path));
  auto views = ParseTemplateRecord(bytes, xyt);
  if (!views.ok()) return Annotate(views.status(), path);
  return views;
}

}  // namespace fingerprint
}  // namespace tessera
