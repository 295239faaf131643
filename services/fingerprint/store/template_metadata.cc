#include "services/fingerprint/store/template_metadata.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/text_checks.h"

namespace tessera {
namespace fingerprint {
namespace {

constexpr uint8_t kMetadataBlockVersion = 1;
constexpr int kMaxFilterCodes = 256;

template <typename T>
void Put(std::string* out, T v) {
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));  // the gallery format is little endian
  out->append(b, sizeof(T));
}

template <typename T>
bool Get(absl::string_view data, size_t* pos, T* v) {
  if (data.size() - *pos < sizeof(T)) return false;
  std::memcpy(v, data.data() + *pos, sizeof(T));
  *pos += sizeof(T);
  return true;
}

template <typename Len>
bool GetText(absl::string_view data, size_t* pos, std::string* out) {
  Len n = 0;
  if (!Get(data, pos, &n) || data.size() - *pos < n) return false;
  out->assign(data.data() + *pos, n);
  *pos += n;
  return true;
}

absl::Status CheckText(absl::string_view text, size_t max_bytes, absl::string_view what) {
  if (text.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(what, " must be at most ", max_bytes, " bytes, got ", text.size()));
  }
  return CheckIdentifierText(text, what);
}

bool IsLeapYear(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

}  // namespace

absl::Status NormalizeCaptureDate(absl::string_view date, std::string* out) {
  std::string digits;
  if (date.size() == 10 && date[4] == '-' && date[7] == '-') {
    digits = absl::StrCat(date.substr(0, 4), date.substr(5, 2), date.substr(8, 2));
  } else if (date.size() == 8) {
    digits = std::string(date);
  }
  const auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("capture date ", QuoteBounded(date), " is not a date (YYYY-MM-DD or YYYYMMDD)"));
  };
  if (digits.size() != 8 || !std::all_of(digits.begin(), digits.end(), absl::ascii_isdigit)) return bad();
  int y = 0, m = 0, d = 0;
  if (!absl::SimpleAtoi(digits.substr(0, 4), &y) || !absl::SimpleAtoi(digits.substr(4, 2), &m) ||
      !absl::SimpleAtoi(digits.substr(6, 2), &d)) {
    return bad();
  }
  static constexpr int kDays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y < 1800 || m < 1 || m > 12 || d < 1 || d > kDays[m - 1] + (m == 2 && IsLeapYear(y) ? 1 : 0)) return bad();
  *out = absl::StrCat(digits.substr(0, 4), "-", digits.substr(4, 2), "-", digits.substr(6, 2));
  return absl::OkStatus();
}

absl::Status NormalizeAttributes(std::vector<std::pair<std::string, std::string>>* attributes) {
  std::stable_sort(attributes->begin(), attributes->end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 1; i < attributes->size(); ++i) {
    if ((*attributes)[i].first == (*attributes)[i - 1].first) {
      return absl::InvalidArgumentError(
          absl::StrCat("attribute key ", QuoteBounded((*attributes)[i].first), " is given twice"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateTemplateMetadata(const TemplateMetadata& m) {
  TESSERA_RETURN_IF_ERROR(CheckText(m.subject_id, kMaxSubjectIdLength, "subject id"));
  TESSERA_RETURN_IF_ERROR(CheckText(m.source_tcn, kMaxSourceTcnLength, "source TCN"));
  if (m.finger_position < 0 || m.finger_position > 255) {
    return absl::InvalidArgumentError(absl::StrCat("finger position must be 0-255, got ", m.finger_position));
  }
  if (m.impression_type < kUnknownImpressionType || m.impression_type > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("impression type must be 0-255 (or -1: not given), got ", m.impression_type));
  }
  if (!m.capture_date.empty()) {
    std::string normal;
    TESSERA_RETURN_IF_ERROR(NormalizeCaptureDate(m.capture_date, &normal));
    if (normal != m.capture_date) {
      return absl::InvalidArgumentError(
          absl::StrCat("capture date ", QuoteBounded(m.capture_date), " must be written YYYY-MM-DD"));
    }
  }
  if (m.attributes.size() > kMaxMetadataAttributes) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most ", kMaxMetadataAttributes, " attributes, got ", m.attributes.size()));
  }
  for (size_t i = 0; i < m.attributes.size(); ++i) {
    const auto& [key, value] = m.attributes[i];
    if (key.empty()) return absl::InvalidArgumentError("an attribute key is empty");
    TESSERA_RETURN_IF_ERROR(CheckText(key, kMaxAttributeKeyLength, "attribute key"));
    TESSERA_RETURN_IF_ERROR(CheckText(value, kMaxAttributeValueLength, absl::StrCat("attribute ", QuoteBounded(key))));
    if (i > 0 && m.attributes[i - 1].first >= key) {
      return absl::InvalidArgumentError(absl::StrCat("attribute key ", QuoteBounded(key),
                                                     " is repeated or out of order (keys are sorted, unique)"));
    }
  }
  return absl::OkStatus();
}

void AppendMetadataBlock(const TemplateMetadata& m, std::string* out) {
  Put<uint8_t>(out, kMetadataBlockVersion);
  Put<uint16_t>(out, static_cast<uint16_t>(m.subject_id.size()));
  out->append(m.subject_id);
  Put<uint8_t>(out, static_cast<uint8_t>(m.finger_position));
  Put<int16_t>(out, static_cast<int16_t>(m.impression_type));
  Put<uint16_t>(out, static_cast<uint16_t>(m.capture_date.size()));
  out->append(m.capture_date);
  Put<uint16_t>(out, static_cast<uint16_t>(m.source_tcn.size()));
  out->append(m.source_tcn);
  Put<uint16_t>(out, static_cast<uint16_t>(m.attributes.size()));
  for (const auto& [key, value] : m.attributes) {
    Put<uint16_t>(out, static_cast<uint16_t>(key.size()));
    out->append(key);
    Put<uint32_t>(out, static_cast<uint32_t>(value.size()));
    out->append(value);
  }
}

bool ReadMetadataBlock(absl::string_view data, size_t* pos, TemplateMetadata* out) {
  uint8_t version = 0, fgp = 0;
  int16_t imp = 0;
  uint16_t n = 0;
  if (!Get(data, pos, &version) || version != kMetadataBlockVersion) return false;
  if (!GetText<uint16_t>(data, pos, &out->subject_id) || !Get(data, pos, &fgp) || !Get(data, pos, &imp) ||
      !GetText<uint16_t>(data, pos, &out->capture_date) || !GetText<uint16_t>(data, pos, &out->source_tcn) ||
      !Get(data, pos, &n)) {
    return false;
  }
  out->finger_position = fgp;
  out->impression_type = imp;
  out->attributes.resize(n);
  for (auto& [key, value] : out->attributes) {
    if (!GetText<uint16_t>(data, pos, &key) || !GetText<uint32_t>(data, pos, &value)) return false;
  }
  return true;
}

bool TemplateFilter::Accepts(int finger_position, int impression_type) const {
  const auto in = [](const std::vector<int>& list, int v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  return in(finger_positions, finger_position) && in(impression_types, impression_type);
}

std::string TemplateFilter::Key() const {
  if (empty()) return "";
  auto canonical = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return absl::StrJoin(v, ",");
  };
  return absl::StrCat("fgp=", canonical(finger_positions), ";imp=", canonical(impression_types));
}

absl::Status ValidateTemplateFilter(const TemplateFilter& f) {
  if (f.finger_positions.size() > kMaxFilterCodes || f.impression_types.size() > kMaxFilterCodes) {
    return absl::InvalidArgumentError(absl::StrCat("a search filter lists at most ", kMaxFilterCodes, " codes"));
  }
  for (int v : f.finger_positions) {
    if (v < 0 || v > 255) return absl::InvalidArgumentError(absl::StrCat("finger_positions: ", v, " is not 0-255"));
  }
  for (int v : f.impression_types) {
    if (v < kUnknownImpressionType || v > 255) {
      return absl::InvalidArgumentError(absl::StrCat("impression_types: ", v, " is not 0-255 (or -1: not given)"));
    }
  }
  return absl::OkStatus();
}

std::string FingerPositionName(int fgp) {
  // ANSI/NIST-ITL 1-2011 Table 8 (friction ridge positions) for the finger codes.
  static const char* const kNames[] = {"unknown finger",        "right thumb",           "right index",
                                       "right middle",          "right ring",            "right little",
                                       "left thumb",            "left index",            "left middle",
                                       "left ring",             "left little",           "plain right thumb",
                                       "plain left thumb",      "plain right four fingers", "plain left four fingers",
                                       "left and right thumbs", "right extra digit",     "left extra digit",
                                       "unknown friction ridge", "EJI or tip"};
  if (fgp >= 0 && fgp < static_cast<int>(sizeof(kNames) / sizeof(kNames[0]))) return kNames[fgp];
  return absl::StrCat("FGP ", fgp);
}

}  // namespace fingerprint
}  // namespace tessera
