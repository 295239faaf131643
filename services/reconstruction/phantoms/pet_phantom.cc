#include "services/reconstruction/phantoms/pet_phantom.h"

#include <algorithm>
#include <cmath>
#include <random>

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
