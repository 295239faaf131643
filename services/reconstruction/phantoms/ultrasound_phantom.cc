#include "services/reconstruction/phantoms/ultrasound_phantom.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera::recon::phantoms {

namespace us = ultrasound;

absl::StatusOr<UltrasoundPhantom> MakeUltrasoundPhantom(const UltrasoundPhantomOptions& o) {
  if (o.kind != "points" && o.kind != "cyst") {
    return absl::InvalidArgumentError(absl::StrCat("kind '", o.kind, "' is not one of points, cyst"));
  }
  if (o.channels < 2 || o.channels > us::kMaxChannels) {
    return absl::InvalidArgumentError(absl::StrCat("channels must be in [2, ", us::kMaxChannels, "], got ", o.channels));
  }
  if (o.transmits < 1 || o.transmits > 128) {
    return absl::InvalidArgumentError(absl::StrCat("transmits must be in [1, 128], got ", o.transmits));
  }
  if (!(o.noise >= 0) || !std::isfinite(o.noise)) {
    return absl::InvalidArgumentError(absl::StrCat("noise must be >= 0, got ", o.noise));
  }
  constexpr double kFc = 5e6, kPitch = 0.3e-3;
  UltrasoundPhantom p;
  const us::LinearArray probe = us::LinearArray::Uniform(o.channels, kPitch, kFc);
  const us::TransmitSequence sequence = o.synthetic_aperture
                                            ? us::TransmitSequence::SyntheticAperture(o.channels)
                                            : us::TransmitSequence::PlaneWaves(o.transmits, 10 * M_PI / 180);
  us::Sampling sampling;
  sampling.sampling_frequency_hz = 4 * kFc;
  sampling.sound_speed = 1540;
  sampling.demodulation_frequency_hz = o.iq ? kFc : 0;
  // Targets within the aperture's middle half, so every one is well imaged.
  const double half = 0.25 * kPitch * (o.channels - 1);
  std::vector<us::Scatterer> scatterers;
  double z_max = 0;
  if (o.kind == "points") {
    for (int i = 0; i < 5; ++i) p.targets.push_back({-half + i * half / 2, (12 + 5 * i) * 1e-3, 1.0});
    scatterers = p.targets;
    z_max = 34e-3;
  } else {
    p.cysts = {{0.0, 22e-3, 3e-3}};
    p.targets = {{-0.6 * half, 22e-3, 3.0}, {0.6 * half, 22e-3, 3.0}};
    scatterers = us::SpecklePhantom(4000, -half, half, 14e-3, 30e-3, p.cysts, o.seed);
    scatterers.insert(scatterers.end(), p.targets.begin(), p.targets.end());
    z_max = 31e-3;
  }
  us::SimulationOptions sim;
  sim.iq = o.iq;
  sim.relative_noise = o.noise;
  sim.seed = o.seed;
  TESSERA_ASSIGN_OR_RETURN(p.acquisition,
                           us::Simulate(probe, sequence, sampling, us::SamplesForDepth(probe, sequence, sampling, z_max),
                                        scatterers, sim));
  return p;
}

}  // namespace tessera::recon::phantoms
