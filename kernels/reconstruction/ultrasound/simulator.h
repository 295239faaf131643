// Point-scatterer channel-data simulator for linear arrays (tests, benches,
// the demo): analytic, no Field II. For scatterer s (position r_s, amplitude
// a_s), transmit t and element e, the echo is a Gaussian-modulated pulse
//   a_s * G_t * D(theta_e) * (r0 / r_e) * env(t' - tau) * carrier(t' - tau)
//   tau = T_t(r_s) + |r_s - e| / c0 - d_t (delays of acquisition.h)
//   env(u) = exp(-u^2 / (2 sigma^2)),  sigma = sqrt(2 ln 2) / (pi B fc)
//            (B: -6 dB fractional bandwidth)
//   carrier(u) = cos(2 pi fc u) for RF; for IQ the analytic exp(i 2 pi fc u)
//            demodulated by exp(-i 2 pi f_demod t')
//   D(theta) = sinc(w sin(theta) / lambda) cos(theta): soft-baffle element
//            directivity (w = element_width; 1 when w = 0)
//   r0 / r_e: 1/r spreading on receive, r0 = 10 mm (and r_e >= lambda)
//   G_t = 1 for plane waves; synthetic aperture: D(theta_tx) r0 / r_tx too.
// Pulses are evaluated within +-4 sigma. Optional white Gaussian noise with a
// standard deviation relative to the largest |sample| of the noiseless frame
// (seeded: the same call gives the same data on any thread count).
#ifndef TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_SIMULATOR_H_
#define TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_SIMULATOR_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/reconstruction/ultrasound/acquisition.h"

namespace tessera {
namespace recon {
namespace ultrasound {

struct Scatterer {
  double x = 0, z = 0;      // m
  double amplitude = 1;
};

struct SimulationOptions {
  double fractional_bandwidth = 0.6;  // B, -6 dB, in (0, 2]
  bool iq = true;                     // IQ (demodulated at sampling.demodulation_frequency_hz) or RF
  double relative_noise = 0;          // noise std / max |noiseless sample|, >= 0
  uint32_t seed = 1;
};

// Simulates `samples` samples per channel. For RF output the sampling's
// demodulation frequency must be 0. INVALID_ARGUMENT for a bad geometry
// (ValidateAcquisitionGeometry), samples < 1, bandwidth outside (0, 2],
// negative noise or a non-finite scatterer.
absl::StatusOr<Acquisition> Simulate(const LinearArray& probe, const TransmitSequence& sequence,
                                     const Sampling& sampling, int64_t samples,
                                     const std::vector<Scatterer>& scatterers, const SimulationOptions& options = {});

// Samples needed to record echoes from depth z_max for this probe and
// sequence (the farthest round trip plus the pulse's tail).
int64_t SamplesForDepth(const LinearArray& probe, const TransmitSequence& sequence, const Sampling& sampling,
                        double z_max, double fractional_bandwidth = 0.6);

// Speckle: `count` scatterers with Gaussian amplitudes uniformly in
// [x_min, x_max] x [z_min, z_max], none inside the circles (anechoic cysts)
// given as (x, z, radius).
struct Cyst {
  double x = 0, z = 0, radius = 0;
};
std::vector<Scatterer> SpecklePhantom(int count, double x_min, double x_max, double z_min, double z_max,
                                      const std::vector<Cyst>& cysts, uint32_t seed);

}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_ULTRASOUND_SIMULATOR_H_
