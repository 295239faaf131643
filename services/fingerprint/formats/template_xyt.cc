#include "services/fingerprint/formats/template_xyt.h"

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace fingerprint {
namespace {

constexpr char kContext[] = "xyt text";

absl::Status Invalid(size_t line, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(kContext, ": line ", line, ": ", message));
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// A decimal integer of at most 9 digits with an optional sign.
bool ParseInt(absl::string_view token, int* value) {
  size_t i = 0;
  bool negative = false;
  if (i < token.size() && (token[i] == '-' || token[i] == '+')) {
    negative = token[i] == '-';
    ++i;
  }
  if (i == token.size() || token.size() - i > 9) return false;
  int v = 0;
  for (; i < token.size(); ++i) {
    if (token[i] < '0' || token[i] > '9') return false;
    v = v * 10 + (token[i] - '0');
  }
  *value = negative ? -v : v;
  return true;
}

std::string Shown(absl::string_view token) {
  std::string s;
  for (char c : token.substr(0, 20)) s += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (token.size() > 20) s += "...";
  return s;
}

}  // namespace

absl::StatusOr<Template> ParseXyt(absl::string_view text, const XytOptions& options) {
  if (options.width < 0 || options.width > kMaxCoordinate || options.height < 0 ||
      options.height > kMaxCoordinate) {
    return absl::InvalidArgumentError(absl::StrCat(kContext, ": image size ", options.width, "x", options.height,
                                                   " outside 0..", kMaxCoordinate));
  }
  if (options.convention == XytConvention::kNist && options.height == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(kContext, ": the NIST (bottom-left origin) convention needs the image height"));
  }
  static const char* const kFieldNames[] = {"x", "y", "theta", "quality"};
  Template t;
  t.x_resolution = options.x_resolution;
  t.y_resolution = options.y_resolution;
  size_t fields_per_line = 0;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    const absl::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    std::vector<absl::string_view> tokens;
    for (size_t i = 0; i < line.size();) {
      if (IsSpace(line[i])) {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < line.size() && !IsSpace(line[j])) ++j;
      tokens.push_back(line.substr(i, j - i));
      i = j;
    }
    if (tokens.empty() || tokens[0][0] == '#') continue;
    if (tokens.size() != 3 && tokens.size() != 4) {
      return Invalid(line_no, absl::StrCat(tokens.size(), " fields (want \"x y theta\" or \"x y theta quality\")"));
    }
    if (fields_per_line == 0) fields_per_line = tokens.size();
    if (tokens.size() != fields_per_line) {
      return Invalid(line_no, absl::StrCat(tokens.size(), " fields where earlier lines have ", fields_per_line));
    }
    int v[4] = {0, 0, 0, 0};
    for (size_t f = 0; f < tokens.size(); ++f) {
      if (!ParseInt(tokens[f], &v[f])) {
        return Invalid(line_no, absl::StrCat(kFieldNames[f], " \"", Shown(tokens[f]), "\" is not an integer"));
      }
    }
    if (v[0] < 0 || v[0] > kMaxCoordinate) {
      return Invalid(line_no, absl::StrCat("x=", v[0], " outside 0..", kMaxCoordinate));
    }
    if (v[2] < 0 || v[2] > 359) return Invalid(line_no, absl::StrCat("theta=", v[2], " outside 0..359"));
    if (v[3] < 0 || v[3] > 100) return Invalid(line_no, absl::StrCat("quality=", v[3], " outside 0..100"));
    if (t.minutiae.size() == kMaxMinutiaePerView) {
      return Invalid(line_no, absl::StrCat("more than ", kMaxMinutiaePerView, " minutiae"));
    }
    Minutia m;
    m.x = v[0];
    int degrees = v[2];
    if (options.convention == XytConvention::kNist) {
      if (v[1] < 1 || v[1] > options.height) {
        return Invalid(line_no, absl::StrCat("y=", v[1], " outside 1..", options.height,
                                             " (NIST convention, image height ", options.height, ")"));
      }
      m.y = options.height - v[1];
      degrees = (degrees + 180) % 360;
    } else {
      if (v[1] < 0 || v[1] > kMaxCoordinate) {
        return Invalid(line_no, absl::StrCat("y=", v[1], " outside 0..", kMaxCoordinate));
      }
      m.y = v[1];
    }
    if (options.width > 0 && m.x >= options.width) {
      return Invalid(line_no, absl::StrCat("x=", m.x, " outside the image width ", options.width));
    }
    if (options.height > 0 && m.y >= options.height) {
      return Invalid(line_no, absl::StrCat("y=", m.y, " outside the image height ", options.height));
    }
    m.angle = degrees * (M_PI / 180.0);
    m.quality = v[3];
    m.type = MinutiaType::kOther;
    t.minutiae.push_back(m);
  }
  int max_x = 0, max_y = 0;
  for (const Minutia& m : t.minutiae) {
    max_x = std::max(max_x, m.x);
    max_y = std::max(max_y, m.y);
  }
  t.width = options.width > 0 ? options.width : std::min(max_x + 1, kMaxCoordinate);
  t.height = options.height > 0 ? options.height : std::min(max_y + 1, kMaxCoordinate);
  return t;
}

absl::StatusOr<std::string> WriteXyt(const Template& view, const XytOptions& options) {
  TESSERA_RETURN_IF_ERROR(ValidateTemplate(view));
  std::string out;
  for (const Minutia& m : view.minutiae) {
    int degrees = static_cast<int>(std::lround(NormalizeAngle(m.angle) * (180.0 / M_PI))) % 360;
    int y = m.y;
    if (options.convention == XytConvention::kNist) {
      y = view.height - m.y;
      degrees = (degrees + 180) % 360;
    }
    absl::StrAppend(&out, m.x, " ", y, " ", degrees);
    if (options.write_quality) absl::StrAppend(&out, " ", m.quality);
    out += '\n';
  }
  return out;
}

}  // namespace fingerprint
}  // namespace tessera
