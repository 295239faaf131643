#include "services/fingerprint/extract/extractor.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/extract/skeleton.h"

namespace tessera {
namespace fingerprint {
namespace {

constexpr float kPi = 3.14159265358979f;

struct Candidate {
  float x = 0, y = 0;
  float direction = 0;  // image coordinates (x right, y down), radians
  MinutiaType type = MinutiaType::kOther;
  float quality = 0;    // 0..1
  bool keep = true;
};

float AngleDiff(float a, float b) {
  float d = std::fmod(std::fabs(a - b), 2 * kPi);
  return d > kPi ? 2 * kPi - d : d;
}

// The angle from `from` to `to` in image coordinates.
float Heading(float fx, float fy, float tx, float ty) { return std::atan2(ty - fy, tx - fx); }

// The local ridge direction (mod pi) turned to the side of `rough`.
float AlignWithField(const RidgeField& field, float x, float y, float rough) {
  float t = field.OrientationAt(x, y);
  if (AngleDiff(t, rough) > kPi / 2) t += kPi;
  return std::fmod(t + 2 * kPi, 2 * kPi);
}

// True when the disc of `radius` around (x, y) lies in the print.
bool InsidePrint(const RidgeField& field, int width, int height, float x, float y, float radius) {
  for (float r : {radius * 0.5f, radius}) {
    for (int k = 0; k < 16; ++k) {
      const float a = 2 * kPi * k / 16;
      const int px = static_cast<int>(std::lround(x + r * std::cos(a)));
      const int py = static_cast<int>(std::lround(y + r * std::sin(a)));
      if (px < 0 || py < 0 || px >= width || py >= height || !field.ForegroundAt(px, py)) return false;
    }
  }
  return true;
}

}  // namespace

FloatImage NormalizeImage(const GrayImage& image) {
  FloatImage out(image.width, image.height);
  double sum = 0, sum2 = 0;
  for (uint8_t p : image.pixels) sum += p, sum2 += static_cast<double>(p) * p;
  const double n = static_cast<double>(image.pixels.size());
  const double mean = sum / n;
  const double var = std::max(0.0, sum2 / n - mean * mean);
  const float inv = var > 1e-9 ? static_cast<float>(1 / std::sqrt(var)) : 0.0f;
  for (size_t i = 0; i < image.pixels.size(); ++i) out.v[i] = static_cast<float>(image.pixels[i] - mean) * inv;
  return out;
}

absl::Status CheckExtractable(const GrayImage& image) {
  if (image.width < 32 || image.height < 32 ||
      image.pixels.size() != static_cast<size_t>(image.width) * image.height) {
    return absl::InvalidArgumentError(
        absl::StrCat("a ", image.width, " x ", image.height, " image is too small to hold a fingerprint (32 x 32 at least)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Extraction> ExtractMinutiae(const GrayImage& image, const ExtractOptions& o) {
  if (absl::Status s = CheckExtractable(image); !s.ok()) return s;
  Extraction out;
  const FloatImage normalized = NormalizeImage(image);
  out.field = EstimateRidgeField(normalized, o.field);
  out.enhanced = GaborEnhance(normalized, out.field, o.field, o.gabor);
  out.skeleton = BinarizeRidges(out.enhanced, out.field);
  Thin(out.skeleton, image.width, image.height);
  MinutiaeFromSkeleton(o, out);
  return out;
}

void MinutiaeFromSkeleton(const ExtractOptions& o, Extraction& out) {
  const int w = out.enhanced.width, h = out.enhanced.height;
  const RidgeField& field = out.field;
  const std::vector<uint8_t>& sk = out.skeleton;

  // Candidates: crossing number 1 (ending) or 3 (bifurcation), inside the print.
  std::vector<Candidate> cands;
  for (int y = 1; y < h - 1; ++y) {
    for (int x = 1; x < w - 1; ++x) {
      if (!sk[static_cast<size_t>(y) * w + x]) continue;
      const int cn = CrossingNumber(sk, w, x, y);
      if (cn != 1 && cn != 3) continue;
      if (!InsidePrint(field, w, h, static_cast<float>(x), static_cast<float>(y), static_cast<float>(o.border_margin))) {
        continue;
      }
      const Point p{x, y};
      std::vector<Point> nb = Neighbours(sk, w, h, x, y);
      Candidate c;
      c.x = static_cast<float>(x);
      c.y = static_cast<float>(y);
      const float wl = field.wavelength[field.BlockOf(x, y)];
      const int spur = static_cast<int>(std::lround(o.spur_length * wl));
      if (cn == 1) {
        if (nb.empty()) continue;
        const Trace t = Walk(sk, w, h, p, nb[0], o.trace_steps);
        if (t.path.empty()) continue;
        // A short piece ending at another minutia: a spur or a tiny island.
        if ((t.hit_minutia || t.dead_end) && static_cast<int>(t.path.size()) < spur) continue;
        const Point& end = t.path.back();
        // Along the ridge, away from its end (the convention of ISO templates
        // as commercial extractors write them; see the test).
        c.direction = AlignWithField(field, c.x, c.y, Heading(c.x, c.y, end.x, end.y));
        c.type = MinutiaType::kEnding;
      } else {
        // Three branches: the two nearest in direction are the fork; the
        // direction points from the stem into the fork.
        const std::vector<Point> firsts = BranchStarts(sk, w, x, y);
        if (firsts.size() != 3) continue;
        float heading[3];
        bool short_branch = false;
        for (int i = 0; i < 3; ++i) {
          const Trace t = Walk(sk, w, h, p, firsts[i], o.trace_steps);
          const Point& end = t.path.back();
          heading[i] = Heading(c.x, c.y, end.x, end.y);
          if ((t.hit_minutia || t.dead_end) && static_cast<int>(t.path.size()) < spur) short_branch = true;
        }
        if (short_branch) continue;
        int stem = 0;
        float best = -1;
        for (int i = 0; i < 3; ++i) {
          const float d = AngleDiff(heading[(i + 1) % 3], heading[(i + 2) % 3]);
          if (best < 0 || d < best) best = d, stem = i;
        }
        c.direction = AlignWithField(field, c.x, c.y, heading[stem] + kPi);
        c.type = MinutiaType::kBifurcation;
      }
      const int b = field.BlockOf(x, y);
      c.quality = field.coherence[b];
      cands.push_back(c);
    }
  }

  // Pairs that are one defect, not two minutiae.
  for (size_t i = 0; i < cands.size(); ++i) {
    for (size_t j = i + 1; j < cands.size(); ++j) {
      Candidate& a = cands[i];
      Candidate& b = cands[j];
      const float dx = b.x - a.x, dy = b.y - a.y;
      const float dist = std::sqrt(dx * dx + dy * dy);
      const float wl = field.wavelength[field.BlockOf(static_cast<int>(a.x), static_cast<int>(a.y))];
      if (dist > std::max(o.break_distance, o.bridge_distance) * wl) continue;
      const bool facing = AngleDiff(a.direction, b.direction) > 2 * kPi / 3;
      // How far b lies to the side of a's ridge line, and a of b's.
      const float off = std::max(std::fabs(dx * std::sin(a.direction) - dy * std::cos(a.direction)),
                                 std::fabs(dx * std::sin(b.direction) - dy * std::cos(b.direction)));
      if (a.type == MinutiaType::kEnding && b.type == MinutiaType::kEnding && facing && dist <= o.break_distance * wl &&
          (o.break_offset <= 0 || off <= o.break_offset * wl)) {
        a.keep = b.keep = false;  // a broken ridge
      } else if (dist < o.bridge_distance * wl) {
        a.keep = b.keep = false;  // a bridge, a hole, a spur
      }
    }
  }
  // Clusters: many minutiae in a small disc are noise.
  for (size_t i = 0; i < cands.size(); ++i) {
    const float wl = field.wavelength[field.BlockOf(static_cast<int>(cands[i].x), static_cast<int>(cands[i].y))];
    const float r2 = (o.cluster_radius * wl) * (o.cluster_radius * wl);
    int near = 0;
    for (size_t j = 0; j < cands.size(); ++j) {
      if (i == j) continue;
      const float dx = cands[j].x - cands[i].x, dy = cands[j].y - cands[i].y;
      near += dx * dx + dy * dy < r2;
    }
    if (near >= 3) cands[i].keep = false;
  }

  std::vector<Candidate> kept;
  for (const Candidate& c : cands) {
    if (c.keep && c.quality * 100 >= o.min_quality) kept.push_back(c);
  }
  std::stable_sort(kept.begin(), kept.end(), [](const Candidate& a, const Candidate& b) { return a.quality > b.quality; });
  if (static_cast<int>(kept.size()) > o.max_minutiae) kept.resize(o.max_minutiae);

  out.view.width = w;
  out.view.height = h;
  out.view.x_resolution = out.view.y_resolution = 197;
  for (const Candidate& c : kept) {
    Minutia m;
    m.x = static_cast<int>(std::lround(c.x));
    m.y = static_cast<int>(std::lround(c.y));
    // Image coordinates have y down; ISO angles turn counterclockwise as displayed.
    m.angle = NormalizeAngle(-c.direction);
    m.type = c.type;
    m.quality = std::max(1, std::min(100, static_cast<int>(std::lround(c.quality * 100))));
    out.view.minutiae.push_back(m);
  }
  std::sort(out.view.minutiae.begin(), out.view.minutiae.end(), [](const Minutia& a, const Minutia& b) {
    return a.y != b.y ? a.y < b.y : a.x < b.x;
  });
}

}  // namespace fingerprint
}  // namespace tessera
