#include "services/fingerprint/extract/extract_parity.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera {
namespace fingerprint {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Minutia angles are radians (Template).
double AngleDiffDeg(double a, double b) {
  double d = std::fmod(std::fabs(a - b), 2 * kPi);
  if (d > kPi) d = 2 * kPi - d;
  return d * 180 / kPi;
}

}  // namespace

void ExtractParity::Add(const ExtractParity& o) {
  blocks += o.blocks;
  orientation_max = std::max(orientation_max, o.orientation_max);
  coherence_max = std::max(coherence_max, o.coherence_max);
  contrast_max = std::max(contrast_max, o.contrast_max);
  foreground_diff += o.foreground_diff;
  wavelength_diff += o.wavelength_diff;
  wavelength_max = std::max(wavelength_max, o.wavelength_max);
  ridge_power_max = std::max(ridge_power_max, o.ridge_power_max);
  pixels += o.pixels;
  enhanced_max = std::max(enhanced_max, o.enhanced_max);
  enhanced_diff += o.enhanced_diff;
  skeleton_pixels += o.skeleton_pixels;
  skeleton_diff += o.skeleton_diff;
  cpu_minutiae += o.cpu_minutiae;
  gpu_minutiae += o.gpu_minutiae;
  matched += o.matched;
}

std::string ExtractParity::Describe() const {
  return absl::StrFormat(
      "field: %d blocks, orientation max %.3g rad, coherence max %.3g, contrast max %.3g, foreground %d differ, "
      "wavelength %d differ (max %.3g), ridge power max %.3g | enhanced: %d pixels, max |diff| %.3g, %d (%.4f%%) "
      "beyond tolerance | skeleton: %d of %d pixels differ (%.4f%%) | minutiae: CPU %d GPU %d matched %d",
      blocks, orientation_max, coherence_max, contrast_max, foreground_diff, wavelength_diff, wavelength_max,
      ridge_power_max, pixels, enhanced_max, enhanced_diff, pixels ? 100.0 * enhanced_diff / pixels : 0.0,
      skeleton_diff, skeleton_pixels, skeleton_pixels ? 100.0 * skeleton_diff / skeleton_pixels : 0.0,
      cpu_minutiae, gpu_minutiae, matched);
}

ExtractParity CompareExtractions(const Extraction& gpu, const Extraction& cpu, const ExtractParityTolerances& tol) {
  ExtractParity p;
  const RidgeField& a = gpu.field;
  const RidgeField& b = cpu.field;
  if (a.cols != b.cols || a.rows != b.rows || a.orientation.size() != b.orientation.size()) {
    p.blocks = static_cast<int64_t>(b.orientation.size());
    p.foreground_diff = p.blocks;  // shapes differ: everything differs
    return p;
  }
  p.blocks = static_cast<int64_t>(b.orientation.size());
  const auto rel = [](double x, double y) { return std::fabs(x - y) / (1 + std::fabs(y)); };
  for (size_t i = 0; i < b.orientation.size(); ++i) {
    double d = std::fmod(std::fabs(static_cast<double>(a.orientation[i]) - b.orientation[i]), kPi);
    d = std::min(d, kPi - d);
    p.orientation_max = std::max(p.orientation_max, d);
    p.coherence_max = std::max(p.coherence_max, rel(a.coherence[i], b.coherence[i]));
    p.contrast_max = std::max(p.contrast_max, rel(a.contrast[i], b.contrast[i]));
    p.foreground_diff += a.foreground[i] != b.foreground[i];
    const double dw = std::fabs(static_cast<double>(a.wavelength[i]) - b.wavelength[i]);
    p.wavelength_diff += dw > 1e-4;
    p.wavelength_max = std::max(p.wavelength_max, dw);
    p.ridge_power_max =
        std::max(p.ridge_power_max, std::fabs(static_cast<double>(a.ridge_power[i]) - b.ridge_power[i]));
  }
  p.pixels = static_cast<int64_t>(cpu.skeleton.size());
  if (gpu.enhanced.v.size() == cpu.enhanced.v.size()) {
    for (size_t i = 0; i < cpu.enhanced.v.size(); ++i) {
      const double d = std::fabs(static_cast<double>(gpu.enhanced.v[i]) - cpu.enhanced.v[i]);
      p.enhanced_max = std::max(p.enhanced_max, d);
      p.enhanced_diff += d > tol.enhanced_abs;
    }
  }
  if (gpu.skeleton.size() == cpu.skeleton.size()) {
    for (size_t i = 0; i < cpu.skeleton.size(); ++i) {
      p.skeleton_pixels += gpu.skeleton[i] || cpu.skeleton[i];
      p.skeleton_diff += (gpu.skeleton[i] != 0) != (cpu.skeleton[i] != 0);
    }
  } else {
    p.skeleton_diff = p.skeleton_pixels = p.pixels;
  }
  // Minutiae: all pairs within the tolerances, nearest first, each used once.
  const std::vector<Minutia>& mg = gpu.view.minutiae;
  const std::vector<Minutia>& mc = cpu.view.minutiae;
  p.gpu_minutiae = static_cast<int>(mg.size());
  p.cpu_minutiae = static_cast<int>(mc.size());
  struct Pair {
    double dist;
    int g, c;
  };
  std::vector<Pair> pairs;
  for (size_t i = 0; i < mg.size(); ++i) {
    for (size_t j = 0; j < mc.size(); ++j) {
      const double dist = std::hypot(mg[i].x - mc[j].x, mg[i].y - mc[j].y);
      if (dist <= tol.minutia_px && AngleDiffDeg(mg[i].angle, mc[j].angle) <= tol.minutia_deg &&
          mg[i].type == mc[j].type) {
        pairs.push_back({dist, static_cast<int>(i), static_cast<int>(j)});
      }
    }
  }
  std::stable_sort(pairs.begin(), pairs.end(), [](const Pair& x, const Pair& y) { return x.dist < y.dist; });
  std::vector<char> used_g(mg.size(), 0), used_c(mc.size(), 0);
  for (const Pair& q : pairs) {
    if (used_g[q.g] || used_c[q.c]) continue;
    used_g[q.g] = used_c[q.c] = 1;
    ++p.matched;
  }
  return p;
}

std::string ParityViolations(const ExtractParity& p, const ExtractParityTolerances& t) {
  std::string why;
  const auto fail = [&why](const std::string& s) { absl::StrAppend(&why, why.empty() ? "" : "; ", s); };
  if (p.orientation_max > t.orientation_rad) fail(absl::StrCat("orientation differs by ", p.orientation_max, " rad"));
  if (p.coherence_max > t.block_value) fail(absl::StrCat("coherence differs by ", p.coherence_max));
  if (p.contrast_max > t.block_value) fail(absl::StrCat("contrast differs by ", p.contrast_max));
  if (p.foreground_diff > t.foreground_blocks) fail(absl::StrCat(p.foreground_diff, " foreground blocks differ"));
  if (p.wavelength_diff > t.wavelength_block_share * p.blocks) {
    fail(absl::StrCat(p.wavelength_diff, " of ", p.blocks, " wavelengths differ"));
  }
  if (p.enhanced_diff > t.enhanced_pixel_share * p.pixels) {
    fail(absl::StrCat(p.enhanced_diff, " of ", p.pixels, " enhanced pixels differ by more than ", t.enhanced_abs));
  }
  if (p.skeleton_diff > t.skeleton_share * p.skeleton_pixels) {
    fail(absl::StrCat(p.skeleton_diff, " of ", p.skeleton_pixels, " skeleton pixels differ"));
  }
  const int unmatched = (p.cpu_minutiae - p.matched) + (p.gpu_minutiae - p.matched);
  if (unmatched > t.unmatched_share * p.cpu_minutiae + 1) {
    fail(absl::StrCat(unmatched, " minutiae unmatched (CPU ", p.cpu_minutiae, ", GPU ", p.gpu_minutiae, ")"));
  }
  return why;
}

}  // namespace fingerprint
}  // namespace tessera
