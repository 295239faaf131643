// A PET test object with a known answer: an activity phantom (body, hot
// lesions, a cold region, low-uptake lungs) and its attenuation map (1/mm),
// both made of ellipses/ellipsoids, and their expected and Poisson-noisy
// counts along every line of response of a geometry:
//   y = scale * exp(-integral of mu) * integral of activity,
// with both integrals exact (phantom.h), never from our projectors. TOF is not
// simulated. Optionally with known corrections (issue 36):
//   expected = normalization * y + randoms + scatter.
#ifndef TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_PET_PHANTOM_H_
#define TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_PET_PHANTOM_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "common/ndarray.h"
#include "kernels/reconstruction/geometry.h"
#include "services/reconstruction/phantoms/phantom.h"

namespace tessera::recon::phantoms {

constexpr double kWaterMu = 0.0096;  // 1/mm at 511 keV
constexpr double kLungMu = 0.0025;
constexpr double kBoneMu = 0.0172;

struct PetPhantom {
  Phantom activity;     // arbitrary units per mm^d; background (soft tissue) 1
  Phantom attenuation;  // 1/mm
};

// A torso section (2-D) or torso (3-D) fitting a field of view of `fov_mm`
// (fov_z_mm in z for 3-D): soft tissue (activity 1, water mu), two lungs
// (activity 0.25, lung mu), a spine (activity 0.5, bone mu), three hot lesions
// (activity 4, 6 and 8, one in a lung) and a cold region (activity 0).
PetPhantom MakePetPhantom(double fov_mm, bool is_2d, double fov_z_mm = 0, Vec3 center = {});

struct PetSimulationOptions {
  double total_counts = 1e6;  // scale chosen so that the expected counts sum to this; <= 0: use `scale`
  double scale = 1.0;
  bool poisson = true;        // else counts = expected
  uint64_t seed = 1;          // std::mt19937_64, bins drawn in sinogram order: same seed, same counts
  int supersample = 1;        // rays per detector pixel side, as in AnalyticSinogram
  // Corrections, 0 / false: none. The trues y (before normalization) sum to
  // total_counts; randoms and scatter to these fractions of that sum.
  double randoms_fraction = 0;  // a near-uniform floor (a mild smooth shape over columns and views)
  double scatter_fraction = 0;  // y blurred along the detector columns (Gaussian, sigma = cols / 8)
  // Per-bin efficiencies in [0.7, 1.3]: a block pattern over the detector
  // columns (and rows) times per-column and per-view factors drawn from `seed`.
  bool normalization = false;
};

struct PetSinogram {
  NDArray counts;               // float32 (cols, rows, views): Poisson draws (or expected)
  NDArray expected;             // float32: scale * exp(-mu integral) * activity integral (with corrections: their model)
  NDArray attenuation_factors;  // float32: exp(-mu integral), supersampled the same way
  // The corrections in `expected` (float32 (cols, rows, views)); empty when
  // not simulated.
  NDArray randoms, scatter, normalization;
  double scale = 0;
};

// INVALID_ARGUMENT as AnalyticSinogram, for negative total counts with
// `scale` <= 0, negative or non-finite correction fractions, or when no line
// of response sees any activity.
absl::StatusOr<PetSinogram> SimulatePetSinogram(const PetPhantom& phantom, const CtGeometry& geometry,
                                                const PetSimulationOptions& options = {});

}  // namespace tessera::recon::phantoms

#endif  // TESSERA_SERVICES_RECONSTRUCTION_PHANTOMS_PET_PHANTOM_H_
