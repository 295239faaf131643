#include "services/fingerprint/extract/match_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "services/fingerprint/extract/canvas_draw.h"
#include "services/fingerprint/extract/minutiae_overlay.h"

namespace tessera {
namespace fingerprint {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr int64_t kMaxChartPixels = int64_t{64} << 20;
constexpr int kMargin = 10;        // chart pixels around everything
constexpr int kGap = 30;           // between the two prints
constexpr int kBlankReach = 16;    // a blank canvas ends this far past the farthest minutia
constexpr int kBlankMinimum = 64;  // and is at least this big

// Pair colours, told apart from each other and from the red / green type
// marks; pair k takes kPalette[k % 12].
constexpr Rgb kPalette[] = {{0, 110, 255}, {255, 140, 0},  {210, 0, 210},  {0, 190, 210},
                            {230, 200, 0}, {140, 70, 255}, {255, 70, 150}, {0, 150, 110},
                            {150, 100, 30}, {90, 180, 255}, {120, 120, 0}, {190, 120, 255}};

// Black or white, whichever reads better on `c` (BT.601 luma).
Rgb Legible(Rgb c) {
  return 299 * c.r + 587 * c.g + 114 * c.b < 128000 ? Rgb{255, 255, 255} : Rgb{0, 0, 0};
}

constexpr Rgb kBackground{245, 245, 245};
constexpr Rgb kBlankPanel{228, 228, 228};
constexpr Rgb kInk{20, 20, 20};
constexpr Rgb kCaptionBackground{32, 32, 32};
constexpr Rgb kCaptionInk{250, 250, 250};

struct Panel {
  Image8 gray;  // what is drawn (lightened image or blank)
  int x0 = 0, y0 = 0;
};

absl::Status CheckPrint(const ChartPrint& p, const char* side) {
  if (p.image.width == 0 && p.image.height == 0) return absl::OkStatus();
  if (p.image.width <= 0 || p.image.height <= 0 || p.image.channels != 1 ||
      p.image.pixels.size() != static_cast<size_t>(p.image.width) * p.image.height) {
    return absl::InvalidArgumentError(absl::StrCat("match chart: the ", side, " image must be gray (1 channel) with ",
                                                   "width x height pixels; got ", p.image.width, " x ", p.image.height,
                                                   " x ", p.image.channels, " and ", p.image.pixels.size(), " bytes"));
  }
  return absl::OkStatus();
}

// The print lightened so that coloured marks and lines stand out on the
// ridges, or a blank canvas reaching past the minutiae.
Image8 PanelImage(const ChartPrint& p) {
  if (p.image.width > 0) {
    Image8 out = p.image;
    for (uint8_t& v : out.pixels) v = static_cast<uint8_t>(90 + v * 150 / 255);
    return out;
  }
  int w = kBlankMinimum, h = kBlankMinimum;
  for (const Minutia& m : p.minutiae) {
    w = std::max(w, m.x + kBlankReach);
    h = std::max(h, m.y + kBlankReach);
  }
  return Image8::Make(w, h, 1, kBlankPanel.r);
}

std::string CaptionScore(const MatchChart& c) {
  return absl::StrFormat("SCORE %.4f   PAIRS %d", c.score, static_cast<int>(c.pairs.size()));
}

std::string CaptionAlignment(const MatchChart& c) {
  if (!c.aligned) return "NO ALIGNMENT (FEWER THAN 2 PAIRS)";
  return absl::StrFormat("RMS RESIDUAL %.1f PX   ROTATION %.1f DEG", c.rms_residual, c.rotation * 180 / kPi);
}

constexpr char kLegend[] = "RINGS: RED ENDING, GREEN OTHER   NUMBERED: PAIRS";

}  // namespace

absl::StatusOr<Image8> DrawMatchChart(const MatchChart& chart, const MatchChartOptions& options) {
  const int scale = options.scale;
  if (scale < 1 || scale > 4) {
    return absl::InvalidArgumentError(absl::StrCat("match chart: scale must be 1-4, got ", scale));
  }
  TESSERA_RETURN_IF_ERROR(CheckPrint(chart.probe, "probe"));
  TESSERA_RETURN_IF_ERROR(CheckPrint(chart.candidate, "candidate"));
  for (size_t k = 0; k < chart.pairs.size(); ++k) {
    const ChartPair& p = chart.pairs[k];
    if (p.probe < 0 || p.probe >= static_cast<int>(chart.probe.minutiae.size()) || p.candidate < 0 ||
        p.candidate >= static_cast<int>(chart.candidate.minutiae.size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "match chart: pair ", k + 1, " joins probe minutia ", p.probe, " and candidate minutia ", p.candidate,
          "; the probe has ", chart.probe.minutiae.size(), ", the candidate ", chart.candidate.minutiae.size()));
    }
  }
  const int text = std::max(2, scale);   // labels and caption
  const int number = scale + 1;          // pair numbers
  const int line_height = kFontHeight * text;
  const int header = line_height + 8;
  const int caption = 3 * line_height + 4 * 6;

  Panel left{PanelImage(chart.probe)}, right{PanelImage(chart.candidate)};
  left.x0 = kMargin;
  left.y0 = kMargin + header;
  right.x0 = left.x0 + left.gray.width * scale + kGap;
  right.y0 = left.y0;
  const int64_t panels_height = std::max(left.gray.height, right.gray.height) * static_cast<int64_t>(scale);
  const std::string lines[3] = {CaptionScore(chart), CaptionAlignment(chart), kLegend};
  int64_t width = right.x0 + static_cast<int64_t>(right.gray.width) * scale + kMargin;
  for (const std::string& l : lines) width = std::max<int64_t>(width, TextWidth(l, text) + 2 * kMargin);
  const int64_t height = left.y0 + panels_height + kMargin + caption;
  if (width * height > kMaxChartPixels) {
    return absl::InvalidArgumentError(
        absl::StrCat("match chart: ", width, " x ", height, " pixels is over the limit of ", kMaxChartPixels));
  }
  Image8 img = Image8::Make(static_cast<int>(width), static_cast<int>(height), 3, kBackground.r);

  DrawText(chart.probe.label, left.x0, kMargin, text, kInk, img);
  DrawText(chart.candidate.label, right.x0, kMargin, text, kInk, img);
  DrawGrayInto(left.gray, scale, left.x0, left.y0, img);
  DrawGrayInto(right.gray, scale, right.x0, right.y0, img);
  for (const Minutia& m : chart.probe.minutiae) DrawMinutiaMark(m, MinutiaColour(m.type), scale, left.x0, left.y0, img);
  for (const Minutia& m : chart.candidate.minutiae) {
    DrawMinutiaMark(m, MinutiaColour(m.type), scale, right.x0, right.y0, img);
  }

  // Canvas position of a minutia of a panel.
  const auto at = [scale](const Panel& panel, const Minutia& m, double* x, double* y) {
    *x = panel.x0 + m.x * scale;
    *y = panel.y0 + m.y * scale;
  };
  // Lines first, then rings and numbers on top so no line hides a number.
  for (size_t k = 0; k < chart.pairs.size(); ++k) {
    double x0, y0, x1, y1;
    at(left, chart.probe.minutiae[chart.pairs[k].probe], &x0, &y0);
    at(right, chart.candidate.minutiae[chart.pairs[k].candidate], &x1, &y1);
    DrawLine(x0, y0, x1, y1, scale, kPalette[k % 12], img);
  }
  for (size_t k = 0; k < chart.pairs.size(); ++k) {
    const Rgb colour = kPalette[k % 12];
    const std::string label = absl::StrCat(k + 1);
    const Minutia* ends[2] = {&chart.probe.minutiae[chart.pairs[k].probe],
                              &chart.candidate.minutiae[chart.pairs[k].candidate]};
    const Panel* panels[2] = {&left, &right};
    for (int side = 0; side < 2; ++side) {
      DrawMinutiaMark(*ends[side], colour, scale, panels[side]->x0, panels[side]->y0, img, 6);
      DrawMinutiaMark(*ends[side], colour, scale, panels[side]->x0, panels[side]->y0, img, 6.5);
      double x, y;
      at(*panels[side], *ends[side], &x, &y);
      const int tx = static_cast<int>(x) + 7 * scale, ty = static_cast<int>(y) - 7 * scale - kFontHeight * number;
      FillRect(tx - 1, ty - 1, TextWidth(label, number) + 2, kFontHeight * number + 2, colour, img);
      DrawText(label, tx, ty, number, Legible(colour), img);
    }
  }

  const int caption_top = static_cast<int>(height) - caption;
  FillRect(0, caption_top, static_cast<int>(width), caption, kCaptionBackground, img);
  for (int i = 0; i < 3; ++i) {
    DrawText(lines[i], kMargin, caption_top + 6 + i * (line_height + 6), text, kCaptionInk, img);
  }
  return img;
}

absl::StatusOr<std::string> MatchChartPng(const MatchChart& chart, const MatchChartOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(const Image8 img, DrawMatchChart(chart, options));
  return EncodePngBytes(img);
}

}  // namespace fingerprint
}  // namespace tessera
