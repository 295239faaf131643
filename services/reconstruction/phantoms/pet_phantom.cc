#include "services/reconstruction/phantoms/pet_phantom.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/reconstruction/phantoms/analytic_sinogram.h"

namespace tessera::recon::phantoms {
namespace {

// Torso parts in units of half the field of view: centre, semi-axes (z: 3-D
// only), activity added, mu added (1/mm). Overlaps add, so a lung's entries
// are relative to the body it sits in.
struct Part {
  double x, y, z, a, b, c, activity, mu;
};
constexpr Part kTorso[] = {
    {0, 0, 0, .90, .60, .90, 1.0, kWaterMu},                         // body: soft tissue
    {-.42, .08, 0, .25, .32, .60, -.75, kLungMu - kWaterMu},        // lungs: activity 0.25
    {.42, .08, 0, .25, .32, .60, -.75, kLungMu - kWaterMu},
    {0, -.42, 0, .09, .09, .90, -.5, kBoneMu - kWaterMu},           // spine: activity 0.5
    {.05, .30, 0, .06, .06, .06, 3.0, 0},                           // hot lesion: 4
    {.50, -.30, .15, .04, .04, .04, 5.0, 0},                        // hot lesion: 6
    {-.45, .15, 0, .05, .05, .05, 7.75, 0},                         // hot lesion in a lung: 8
    {-.10, -.15, 0, .12, .08, .15, -1.0, 0},                        // cold region: 0
};

// Float32 (cols, rows, views) filled by value(col, row, view).
template <typename F>
absl::StatusOr<NDArray> SinogramOf(const ProjectionGeometry& p, F value) {
  TESSERA_ASSIGN_OR_RETURN(NDArray out,
                           NDArray::Allocate({p.det_cols, p.det_rows, p.num_views()}, DType::kFloat32));
  float* v = out.data<float>();
  for (int64_t view = 0; view < p.num_views(); ++view) {
    for (int64_t r = 0; r < p.det_rows; ++r) {
      for (int64_t c = 0; c < p.det_cols; ++c) {
        *v++ = static_cast<float>(value(c, r, view));
      }
    }
  }
  return out;
}

void ScaleToSum(NDArray& a, double target) {
  float* v = a.data<float>();
  double sum = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) sum += v[i];
  if (!(sum > 0)) return;
  for (int64_t i = 0; i < a.num_elements(); ++i) v[i] = static_cast<float>(v[i] * (target / sum));
}

// A near-uniform randoms floor: a mild bump over the columns (a fan sum of
// singles rates is largest through the middle) and a slow drift over views.
absl::StatusOr<NDArray> SimulateRandoms(const ProjectionGeometry& p, double total) {
  const double kPi = 3.14159265358979323846;
  TESSERA_ASSIGN_OR_RETURN(NDArray r, SinogramOf(p, [&](int64_t c, int64_t, int64_t view) {
    const double u = 2.0 * (c + 0.5) / static_cast<double>(p.det_cols) - 1.0;
    return (0.85 + 0.15 * (1.0 - u * u)) * (1.0 + 0.1 * std::cos(2.0 * kPi * view / p.num_views()));
  }));
  ScaleToSum(r, total);
  return r;
}

// Scatter: the trues blurred along the columns of each (row, view) by a wide
// Gaussian (sigma = cols / 8), so smooth and wider than the object.
absl::StatusOr<NDArray> SimulateScatter(const ProjectionGeometry& p, const float* trues, double total) {
  TESSERA_ASSIGN_OR_RETURN(NDArray s, SinogramOf(p, [](int64_t, int64_t, int64_t) { return 0.0; }));
  const int64_t cols = p.det_cols, lines = p.det_rows * p.num_views();
  const double sigma = std::max(1.0, cols / 8.0);
  std::vector<double> kernel(2 * cols + 1);
  for (int64_t d = -cols; d <= cols; ++d) kernel[d + cols] = std::exp(-0.5 * d * d / (sigma * sigma));
  float* out = s.data<float>();
  for (int64_t line = 0; line < lines; ++line) {
    const float* in = trues + line * cols;
    for (int64_t c = 0; c < cols; ++c) {
      double acc = 0;
      for (int64_t k = 0; k < cols; ++k) acc += kernel[c - k + cols] * in[k];
      out[line * cols + c] = static_cast<float>(acc);
    }
  }
  ScaleToSum(s, total);
  return s;
}

// Efficiencies: blocks of 8 crystals whose edge crystals see less (0.82 at
// the edges, 1 in the middle) along the columns (and rows in 3-D), times a
// factor per column in [0.9, 1.1] and per view in [0.95, 1.05], clamped to
// [0.7, 1.3]; normalised to mean 1 before clamping.
absl::StatusOr<NDArray> SimulateNormalization(const ProjectionGeometry& p, uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x6e6f726d616c6973ull);  // its own stream: the Poisson draws stay as without it
  std::uniform_real_distribution<double> col_draw(0.9, 1.1), view_draw(0.95, 1.05);
  std::vector<double> col_factor(p.det_cols), view_factor(p.num_views());
  for (double& f : col_factor) f = col_draw(rng);
  for (double& f : view_factor) f = view_draw(rng);
  const auto block = [](int64_t i) { return 1.0 - 0.18 * std::fabs((i % 8) - 3.5) / 3.5; };
  const bool rows = !p.is_2d || p.det_rows > 1;
  TESSERA_ASSIGN_OR_RETURN(NDArray n, SinogramOf(p, [&](int64_t c, int64_t r, int64_t view) {
    return block(c) * (rows ? block(r) : 1.0) * col_factor[c] * view_factor[view];
  }));
  ScaleToSum(n, static_cast<double>(n.num_elements()));
  for (int64_t i = 0; i < n.num_elements(); ++i) n.data<float>()[i] = std::clamp(n.data<float>()[i], 0.7f, 1.3f);
  return n;
}

}  // namespace

PetPhantom MakePetPhantom(double fov_mm, bool is_2d, double fov_z_mm, Vec3 center) {
  const double h = 0.5 * fov_mm, hz = 0.5 * (fov_z_mm > 0 ? fov_z_mm : fov_mm);
  PetPhantom p;
  p.activity.is_2d = p.attenuation.is_2d = is_2d;
  for (const Part& part : kTorso) {
    const Vec3 c{center.x + h * part.x, center.y + h * part.y, is_2d ? 0.0 : center.z + hz * part.z};
    const Vec3 axes{h * part.a, h * part.b, is_2d ? 1.0 : hz * part.c};
    p.activity.ellipsoids.push_back(RotatedAboutZ(part.activity, c, axes, 0));
    if (part.mu != 0) p.attenuation.ellipsoids.push_back(RotatedAboutZ(part.mu, c, axes, 0));
  }
  return p;
}

absl::StatusOr<PetSinogram> SimulatePetSinogram(const PetPhantom& phantom, const CtGeometry& geometry,
                                                const PetSimulationOptions& options) {
  TESSERA_RETURN_IF_ERROR(Validate(geometry));
  if (phantom.activity.is_2d != geometry.projection.is_2d || phantom.attenuation.is_2d != geometry.projection.is_2d) {
    return absl::InvalidArgumentError(absl::StrCat("the PET phantom's dimension does not match the geometry: ",
                                                   Describe(geometry)));
  }
  for (const auto& [name, value] : {std::make_pair("randoms fraction", options.randoms_fraction),
                                    std::make_pair("scatter fraction", options.scatter_fraction)}) {
    if (!std::isfinite(value) || value < 0) {
      return absl::InvalidArgumentError(absl::StrCat("PET simulation: ", name, " must be finite and >= 0, got ", value));
    }
  }
  if (options.total_counts <= 0 && !(options.scale > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("PET simulation: total counts must be > 0 (got ",
                                                   options.total_counts, ") or scale > 0 (got ", options.scale, ")"));
  }
  PetSinogram out;
  // Product per ray, then the pixel mean: what a detector of that width sees.
  TESSERA_ASSIGN_OR_RETURN(out.expected,
                           IntegrateOverDetector(geometry.projection, options.supersample,
                                                 [&](const Vec3& o, const Vec3& d) {
                                                   return std::exp(-LineIntegral(phantom.attenuation, o, d)) *
                                                          LineIntegral(phantom.activity, o, d);
                                                 }));
  TESSERA_ASSIGN_OR_RETURN(out.attenuation_factors,
                           IntegrateOverDetector(geometry.projection, options.supersample,
                                                 [&](const Vec3& o, const Vec3& d) {
                                                   return std::exp(-LineIntegral(phantom.attenuation, o, d));
                                                 }));
  float* y = out.expected.data<float>();
  const int64_t n = out.expected.num_elements();
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    y[i] = std::max(y[i], 0.0f);  // negative activity sums are rounding at cold edges
    sum += y[i];
  }
  if (options.total_counts > 0) {
    if (!(sum > 0)) return absl::InvalidArgumentError("PET simulation: no line of response sees any activity");
    out.scale = options.total_counts / sum;
  } else {
    out.scale = options.scale;
  }
  for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(y[i] * out.scale);
  double trues = 0;
  for (int64_t i = 0; i < n; ++i) trues += y[i];
  if (options.scatter_fraction > 0) {
    TESSERA_ASSIGN_OR_RETURN(out.scatter,
                             SimulateScatter(geometry.projection, y, options.scatter_fraction * trues));
  }
  if (options.randoms_fraction > 0) {
    TESSERA_ASSIGN_OR_RETURN(out.randoms, SimulateRandoms(geometry.projection, options.randoms_fraction * trues));
  }
  if (options.normalization) {
    TESSERA_ASSIGN_OR_RETURN(out.normalization, SimulateNormalization(geometry.projection, options.seed));
    for (int64_t i = 0; i < n; ++i) y[i] *= out.normalization.data<float>()[i];
  }
  for (const NDArray* term : {&out.randoms, &out.scatter}) {
    if (term->empty()) continue;
    for (int64_t i = 0; i < n; ++i) y[i] += term->data<float>()[i];
  }

  if (!options.poisson) {
    TESSERA_ASSIGN_OR_RETURN(out.counts, out.expected.Clone());
    return out;
  }
  TESSERA_ASSIGN_OR_RETURN(out.counts, NDArray::Allocate(out.expected.shape(), DType::kFloat32));
  float* counts = out.counts.data<float>();
  std::mt19937_64 rng(options.seed);
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] > 0) {
      std::poisson_distribution<int64_t> draw(y[i]);
      counts[i] = static_cast<float>(draw(rng));
    } else {
      counts[i] = 0;
    }
  }
  return out;
}

}  // namespace tessera::recon::phantoms
