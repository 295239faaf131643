#include "kernels/registration/pipeline/point_set_csv.h"

#include <cmath>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace tessera::registration {
namespace {

std::vector<std::string> Cells(absl::string_view line) {
  std::vector<std::string> cells;
  for (absl::string_view c : absl::StrSplit(line, ',')) cells.emplace_back(absl::StripAsciiWhitespace(c));
  return cells;
}

// The shortest of %.15g/%.16g/%.17g that reads back as the same double.
std::string Shortest(double v) {
  char buf[40];
  for (int digits = 15; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    double back;
    if (absl::SimpleAtod(buf, &back) && back == v) break;
  }
  return buf;
}

}  // namespace

absl::StatusOr<PointSetCsv> ParsePointSetCsv(absl::string_view text, absl::string_view name, int64_t max_points) {
  PointSetCsv out;
  int line_number = 0;
  bool have_header = false;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    std::vector<std::string> cells = Cells(line);
    if (!have_header) {
      have_header = true;
      out.header = std::move(cells);
      if (out.header.size() < 3) {
        return absl::InvalidArgumentError(
            absl::StrCat(name, " line ", line_number, ": the header needs at least 3 columns (x,y,z)"));
      }
      int found = 0;
      for (int axis = 0; axis < 3; ++axis) {
        for (size_t c = 0; c < out.header.size(); ++c) {
          if (absl::AsciiStrToLower(out.header[c]) == std::string(1, "xyz"[axis])) {
            out.xyz[axis] = static_cast<int>(c);
            ++found;
          }
        }
      }
      if (found != 0 && found != 3) {
        return absl::InvalidArgumentError(absl::StrCat(name, ": the header names some of x, y, z but not all three"));
      }
      continue;
    }
    if (cells.size() != out.header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " line ", line_number, ": ", cells.size(),
                                                     " cells, the header has ", out.header.size()));
    }
    if (static_cast<int64_t>(out.rows.size()) >= max_points) {
      return absl::ResourceExhaustedError(absl::StrCat(name, ": more than ", max_points, " points"));
    }
    std::array<double, 3> p{};
    for (int axis = 0; axis < 3; ++axis) {
      const std::string& cell = cells[out.xyz[axis]];
      if (!absl::SimpleAtod(cell, &p[axis]) || !std::isfinite(p[axis])) {
        return absl::InvalidArgumentError(absl::StrCat(name, " line ", line_number, ", column ",
                                                       out.header[out.xyz[axis]], ": '", cell,
                                                       "' is not a finite number"));
      }
    }
    out.lps.push_back(p);
    out.rows.push_back(std::move(cells));
  }
  if (!have_header) return absl::InvalidArgumentError(absl::StrCat(name, ": empty point set (no header line)"));
  return out;
}

std::string MapPointSet(PointSetCsv points, const std::function<std::array<double, 3>(std::array<double, 3>)>& map_ras) {
  std::string out = absl::StrCat(absl::StrJoin(points.header, ","), "\n");
  for (size_t r = 0; r < points.rows.size(); ++r) {
    const std::array<double, 3>& lps = points.lps[r];
    const std::array<double, 3> mapped = map_ras({-lps[0], -lps[1], lps[2]});
    const double back[3] = {-mapped[0], -mapped[1], mapped[2]};
    for (int axis = 0; axis < 3; ++axis) points.rows[r][points.xyz[axis]] = Shortest(back[axis]);
    absl::StrAppend(&out, absl::StrJoin(points.rows[r], ","), "\n");
  }
  return out;
}

}  // namespace tessera::registration
