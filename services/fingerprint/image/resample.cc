// ResampleTo500Ppi: brings an image to the 500 ppi the extractor and the
// matchers are tuned for. Finer images are area-averaged (a whole factor n,
// within 1 %, averages n x n blocks exactly, so 1000 ppi halves: each output
// pixel is the rounded mean of a 2 x 2 block); coarser ones are interpolated
// bilinearly. The output is round(w * 500 / ppi) x round(h * 500 / ppi).
#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/image/image_decode.h"

namespace tessera {
namespace fingerprint {
namespace {

constexpr double kTargetPpi = 500;

uint8_t RoundToByte(double v) { return static_cast<uint8_t>(std::clamp(std::lround(v), 0L, 255L)); }

int OutputSize(int size, double scale) { return std::max(1, static_cast<int>(std::lround(size / scale))); }

// Each output pixel the rounded mean of an n x n block (clipped at the
// right and bottom edges).
GrayImage BlockMean(const GrayImage& in, int n) {
  GrayImage out;
  out.width = OutputSize(in.width, n);
  out.height = OutputSize(in.height, n);
  out.pixels.resize(static_cast<size_t>(out.width) * out.height);
  for (int oy = 0; oy < out.height; ++oy) {
    const int y_end = std::min(in.height, (oy + 1) * n);
    for (int ox = 0; ox < out.width; ++ox) {
      const int x_end = std::min(in.width, (ox + 1) * n);
      uint32_t sum = 0, count = 0;
      for (int y = oy * n; y < y_end; ++y) {
        for (int x = ox * n; x < x_end; ++x) sum += in.at(x, y);
        count += x_end - ox * n;
      }
      out.at(ox, oy) = static_cast<uint8_t>((sum + count / 2) / count);
    }
  }
  return out;
}

// The source pixels an output pixel covers along one axis, with their
// overlap lengths: output i covers [i * scale, (i + 1) * scale) clipped to
// [0, size).
struct Span {
  int first = 0;
  std::vector<double> weights;
  double total = 0;
};

std::vector<Span> AreaSpans(int size, int out_size, double scale) {
  std::vector<Span> spans(out_size);
  for (int i = 0; i < out_size; ++i) {
    const double lo = i * scale, hi = std::min<double>(size, (i + 1) * scale);
    Span& s = spans[i];
    s.first = static_cast<int>(lo);
    for (int p = s.first; p < size && p < hi; ++p) {
      const double w = std::min<double>(p + 1, hi) - std::max<double>(p, lo);
      s.weights.push_back(w);
      s.total += w;
    }
    if (s.total <= 0) {  // cannot happen for out_size = round(size / scale); never divide by 0
      s.first = std::min(s.first, size - 1);
      s.weights.assign(1, 1.0);
      s.total = 1;
    }
  }
  return spans;
}

// Area averaging for a non-integer factor > 1: rows first, then columns.
GrayImage AreaAverage(const GrayImage& in, double scale) {
  GrayImage out;
  out.width = OutputSize(in.width, scale);
  out.height = OutputSize(in.height, scale);
  const std::vector<Span> xs = AreaSpans(in.width, out.width, scale);
  const std::vector<Span> ys = AreaSpans(in.height, out.height, scale);
  std::vector<double> rows(static_cast<size_t>(out.width) * in.height);  // horizontally averaged
  for (int y = 0; y < in.height; ++y) {
    for (int ox = 0; ox < out.width; ++ox) {
      const Span& s = xs[ox];
      double sum = 0;
      for (size_t k = 0; k < s.weights.size(); ++k) sum += s.weights[k] * in.at(s.first + static_cast<int>(k), y);
      rows[static_cast<size_t>(y) * out.width + ox] = sum / s.total;
    }
  }
  out.pixels.resize(static_cast<size_t>(out.width) * out.height);
  for (int oy = 0; oy < out.height; ++oy) {
    const Span& s = ys[oy];
    for (int ox = 0; ox < out.width; ++ox) {
      double sum = 0;
      for (size_t k = 0; k < s.weights.size(); ++k) {
        sum += s.weights[k] * rows[static_cast<size_t>(s.first + k) * out.width + ox];
      }
      out.at(ox, oy) = RoundToByte(sum / s.total);
    }
  }
  return out;
}

// Bilinear interpolation for a factor < 1 (pixel centres aligned).
GrayImage Bilinear(const GrayImage& in, double scale) {
  GrayImage out;
  out.width = OutputSize(in.width, scale);
  out.height = OutputSize(in.height, scale);
  out.pixels.resize(static_cast<size_t>(out.width) * out.height);
  auto source = [scale](int o, int size, int* a, int* b, double* f) {
    const double s = std::clamp((o + 0.5) * scale - 0.5, 0.0, static_cast<double>(size - 1));
    *a = static_cast<int>(s);
    *b = std::min(*a + 1, size - 1);
    *f = s - *a;
  };
  for (int oy = 0; oy < out.height; ++oy) {
    int y0, y1;
    double fy;
    source(oy, in.height, &y0, &y1, &fy);
    for (int ox = 0; ox < out.width; ++ox) {
      int x0, x1;
      double fx;
      source(ox, in.width, &x0, &x1, &fx);
      const double top = in.at(x0, y0) * (1 - fx) + in.at(x1, y0) * fx;
      const double bottom = in.at(x0, y1) * (1 - fx) + in.at(x1, y1) * fx;
      out.at(ox, oy) = RoundToByte(top * (1 - fy) + bottom * fy);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<GrayImage> ResampleTo500Ppi(const GrayImage& image) {
  if (image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != static_cast<size_t>(image.width) * static_cast<size_t>(image.height)) {
    return absl::InvalidArgumentError(absl::StrCat("cannot resample a ", image.width, "x", image.height, " image of ",
                                                   image.pixels.size(), " pixels"));
  }
  if (!(image.ppi > 0)) {
    return absl::FailedPreconditionError(
        "the image's resolution is unknown (ppi 0): give it with the request to resample to 500 ppi");
  }
  if (image.ppi < 250 || image.ppi > 2000) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot resample from ", image.ppi, " ppi to 500: only 250-2000 ppi is supported"));
  }
  const double scale = image.ppi / kTargetPpi;  // source pixels per output pixel
  GrayImage out;
  constexpr double kTolerance = 0.01 + 1e-9;  // 1 %, and 495 / 500 is a hair over 0.01 below 1
  if (std::abs(scale - 1) <= kTolerance) {
    out = image;
  } else if (scale > 1) {
    const long n = std::lround(scale);
    out = std::abs(scale - n) <= kTolerance * n ? BlockMean(image, static_cast<int>(n)) : AreaAverage(image, scale);
  } else {
    out = Bilinear(image, scale);
  }
  out.ppi = kTargetPpi;
  return out;
}

}  // namespace fingerprint
}  // namespace tessera
