#include "services/fingerprint/eval/cmc_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace fingerprint {
namespace {

constexpr uint8_t kPalette[][3] = {{31, 119, 180}, {214, 39, 40}, {44, 160, 44}, {255, 127, 14}, {148, 103, 189},
                                   {140, 86, 75},  {227, 119, 194}, {23, 190, 207}};
constexpr const char* kPaletteNames[] = {"blue", "red", "green", "orange", "purple", "brown", "pink", "cyan"};
constexpr int kPaletteSize = 8;

struct Canvas {
  Image8& img;
  void Put(int x, int y, const uint8_t rgb[3]) {
    if (x < 0 || y < 0 || x >= img.width || y >= img.height) return;
    for (int c = 0; c < 3; ++c) img.at(x, y, c) = rgb[c];
  }
  void Rect(int x0, int y0, int x1, int y1, const uint8_t rgb[3]) {
    for (int y = std::min(y0, y1); y <= std::max(y0, y1); ++y) {
      for (int x = std::min(x0, x1); x <= std::max(x0, x1); ++x) Put(x, y, rgb);
    }
  }
  // Bresenham, `thick` pixels square pen.
  void Line(int x0, int y0, int x1, int y1, const uint8_t rgb[3], int thick) {
    const int dx = std::abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
    const int dy = -std::abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
    int err = dx + dy;
    for (;;) {
      Rect(x0 - thick / 2, y0 - thick / 2, x0 + (thick - 1) / 2, y0 + (thick - 1) / 2, rgb);
      if (x0 == x1 && y0 == y1) break;
      const int e2 = 2 * err;
      if (e2 >= dy) {
        err += dy;
        x0 += sx;
      }
      if (e2 <= dx) {
        err += dx;
        y0 += sy;
      }
    }
  }
};

}  // namespace

std::vector<double> ComputeCmc(const std::vector<int>& ranks, int max_rank) {
  std::vector<double> rates(std::max(0, max_rank), 0.0);
  if (ranks.empty() || max_rank <= 0) return rates;
  std::vector<int> hits(max_rank + 1, 0);
  for (int r : ranks) {
    if (r >= 1 && r <= max_rank) ++hits[r];
  }
  int cumulative = 0;
  for (int r = 1; r <= max_rank; ++r) {
    cumulative += hits[r];
    rates[r - 1] = static_cast<double>(cumulative) / ranks.size();
  }
  return rates;
}

void CmcCurveColor(int i, uint8_t rgb[3]) {
  const uint8_t* c = kPalette[((i % kPaletteSize) + kPaletteSize) % kPaletteSize];
  rgb[0] = c[0];
  rgb[1] = c[1];
  rgb[2] = c[2];
}

const char* CmcCurveColorName(int i) { return kPaletteNames[((i % kPaletteSize) + kPaletteSize) % kPaletteSize]; }

absl::StatusOr<Image8> RenderCmcPlot(const std::vector<CmcCurve>& curves, const CmcPlotOptions& o) {
  if (o.width < 120 || o.height < 100 || o.width > 8192 || o.height > 8192) {
    return absl::InvalidArgumentError(absl::StrCat("CMC plot: size ", o.width, " x ", o.height,
                                                   " outside 120 x 100 .. 8192 x 8192"));
  }
  if (o.max_rank < 2) return absl::InvalidArgumentError("CMC plot: max_rank must be >= 2");
  if (!(o.y_min >= 0 && o.y_min < 1)) return absl::InvalidArgumentError("CMC plot: y_min must be in [0, 1)");
  if (curves.empty()) return absl::InvalidArgumentError("CMC plot: no curves");
  for (const CmcCurve& c : curves) {
    if (c.rates.empty()) return absl::InvalidArgumentError(absl::StrCat("CMC plot: curve '", c.label, "' is empty"));
    for (double r : c.rates) {
      if (!(r >= 0 && r <= 1)) {
        return absl::InvalidArgumentError(absl::StrCat("CMC plot: curve '", c.label, "' has a rate outside [0, 1]"));
      }
    }
  }
  Image8 img = Image8::Make(o.width, o.height, 3, 255);
  Canvas cv{img};
  const int left = 50, right = o.width - 20, top = 20, bottom = o.height - 40;
  auto px = [&](double rank) {
    return left + static_cast<int>(std::lround((rank - 1) * (right - left) / (o.max_rank - 1)));
  };
  auto py = [&](double rate) {
    const double f = std::max(0.0, (rate - o.y_min) / (1.0 - o.y_min));
    return bottom - static_cast<int>(std::lround(f * (bottom - top)));
  };
  const uint8_t grid[3] = {220, 220, 220}, axis[3] = {0, 0, 0};
  // Grid: ten steps of the hit-rate range, ranks 1 and every 10th.
  for (int i = 0; i <= 10; ++i) {
    const double rate = o.y_min + i * (1.0 - o.y_min) / 10;
    cv.Line(left, py(rate), right, py(rate), grid, 1);
    cv.Line(left - 6, py(rate), left, py(rate), axis, 1);  // tick
  }
  const int step = o.max_rank >= 50 ? 10 : (o.max_rank >= 10 ? 5 : 1);
  for (int r = step; r <= o.max_rank; r += step) {
    cv.Line(px(r), top, px(r), bottom, grid, 1);
    cv.Line(px(r), bottom, px(r), bottom + 6, axis, 1);
  }
  cv.Line(px(1), bottom, px(1), bottom + 6, axis, 1);
  // Axes.
  cv.Line(left, top, left, bottom, axis, 1);
  cv.Line(left, bottom, right, bottom, axis, 1);
  // Curves (steps between consecutive ranks drawn as straight segments).
  for (size_t i = 0; i < curves.size(); ++i) {
    uint8_t rgb[3];
    CmcCurveColor(static_cast<int>(i), rgb);
    const std::vector<double>& r = curves[i].rates;
    const int n = std::min<int>(o.max_rank, r.size());
    if (n == 1) cv.Rect(px(1) - 1, py(r[0]) - 1, px(1) + 1, py(r[0]) + 1, rgb);
    for (int k = 1; k < n; ++k) cv.Line(px(k), py(r[k - 1]), px(k + 1), py(r[k]), rgb, 2);
    // Legend swatch, bottom right, in curve order.
    const int sx = right - 24 - 30 * static_cast<int>(i), sy = bottom - 24;
    cv.Rect(sx, sy, sx + 20, sy + 12, rgb);
  }
  return img;
}

absl::Status WriteCmcPlot(const std::vector<CmcCurve>& curves, const std::string& path, const CmcPlotOptions& o) {
  TESSERA_ASSIGN_OR_RETURN(Image8 img, RenderCmcPlot(curves, o));
  return WritePng(img, path);
}

}  // namespace fingerprint
}  // namespace tessera
