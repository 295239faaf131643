#include "kernels/reconstruction/ultrasound/simulator.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"
#include "common/status.h"

namespace tessera {
namespace recon {
namespace ultrasound {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kReferenceDistance = 10e-3;  // r0 of the 1/r spreading

double PulseSigma(double fc, double bandwidth) { return std::sqrt(2 * std::log(2.0)) / (kPi * bandwidth * fc); }

double Directivity(double width, double wavelength, double sin_theta, double cos_theta) {
  if (width <= 0) return 1;
  const double u = kPi * width * sin_theta / wavelength;
  const double sinc = std::abs(u) < 1e-9 ? 1.0 : std::sin(u) / u;
  return sinc * cos_theta;
}

}  // namespace

int64_t SamplesForDepth(const LinearArray& probe, const TransmitSequence& sequence, const Sampling& sampling,
                        double z_max, double fractional_bandwidth) {
  if (probe.element_x.empty()) return 1;
  const double span = probe.element_x.back() - probe.element_x.front();
  const double reach = std::sqrt(span * span + z_max * z_max);  // farthest element -> deepest point
  // Plane waves reach depth z no later than (|x| + z) / c; SA transmits travel `reach` at most.
  const double tx = sequence.kind == TransmitKind::kPlaneWave ? 0.5 * span + z_max : reach;
  const double tail = 4 * PulseSigma(probe.center_frequency_hz, fractional_bandwidth);
  const double t_end = (tx + reach) / sampling.sound_speed + tail;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil((t_end - sampling.initial_time_s) *
                                                             sampling.sampling_frequency_hz)) + 1);
}

absl::StatusOr<Acquisition> Simulate(const LinearArray& probe, const TransmitSequence& sequence,
                                     const Sampling& sampling, int64_t samples,
                                     const std::vector<Scatterer>& scatterers, const SimulationOptions& options) {
  Acquisition a;
  a.probe = probe;
  a.sequence = sequence;
  a.sampling = sampling;
  a.data.samples = samples;
  a.data.channels = probe.channels();
  a.data.transmits = sequence.transmits();
  TESSERA_RETURN_IF_ERROR(ValidateAcquisitionGeometry(a));
  if (!(options.fractional_bandwidth > 0 && options.fractional_bandwidth <= 2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("simulation: fractional_bandwidth = ", options.fractional_bandwidth, " (must be in (0, 2])"));
  }
  if (!(options.relative_noise >= 0) || !std::isfinite(options.relative_noise)) {
    return absl::InvalidArgumentError(absl::StrCat("simulation: relative_noise = ", options.relative_noise));
  }
  if (!options.iq && sampling.demodulation_frequency_hz != 0) {
    return absl::InvalidArgumentError(absl::StrCat("simulation: RF output with demodulation_frequency_hz = ",
                                                   sampling.demodulation_frequency_hz, " (must be 0)"));
  }
  for (size_t i = 0; i < scatterers.size(); ++i) {
    const Scatterer& s = scatterers[i];
    if (!std::isfinite(s.x) || !std::isfinite(s.z) || !std::isfinite(s.amplitude)) {
      return absl::InvalidArgumentError(absl::StrCat("simulation: scatterer ", i, " is not finite"));
    }
  }

  const double fc = probe.center_frequency_hz, fs = sampling.sampling_frequency_hz, c0 = sampling.sound_speed;
  const double fd = sampling.demodulation_frequency_hz, t0 = sampling.initial_time_s;
  const double lambda = c0 / fc;
  const double sigma = PulseSigma(fc, options.fractional_bandwidth);
  const int n = probe.channels(), nt = sequence.transmits();
  std::vector<std::complex<double>> frame(static_cast<size_t>(a.data.size()));

  ParallelFor(int64_t{n} * nt, [&](int64_t begin, int64_t end, int) {
    for (int64_t line = begin; line < end; ++line) {
      const int e = static_cast<int>(line % n), t = static_cast<int>(line / n);
      std::complex<double>* out = frame.data() + line * samples;
      for (const Scatterer& s : scatterers) {
        const double ex = s.x - probe.element_x[e];
        const double r_rx = std::max(std::sqrt(ex * ex + s.z * s.z), lambda);
        double gain = s.amplitude * Directivity(probe.element_width, lambda, ex / r_rx, s.z / r_rx) *
                      kReferenceDistance / r_rx;
        double tx;
        if (sequence.kind == TransmitKind::kPlaneWave) {
          tx = (s.x * std::sin(sequence.angles_rad[t]) + s.z * std::cos(sequence.angles_rad[t])) / c0;
        } else {
          const double tx_x = s.x - probe.element_x[sequence.elements[t]];
          const double r_tx = std::max(std::sqrt(tx_x * tx_x + s.z * s.z), lambda);
          tx = r_tx / c0;
          gain *= Directivity(probe.element_width, lambda, tx_x / r_tx, s.z / r_tx) * kReferenceDistance / r_tx;
        }
        if (!sequence.delays_s.empty()) tx -= sequence.delays_s[t];  // acquisition.h: recorded d_t later
        const double tau = tx + r_rx / c0;
        const int64_t lo = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((tau - 4 * sigma - t0) * fs)));
        const int64_t hi =
            std::min<int64_t>(samples - 1, static_cast<int64_t>(std::floor((tau + 4 * sigma - t0) * fs)));
        for (int64_t k = lo; k <= hi; ++k) {
          const double time = t0 + k / fs, u = time - tau;
          const double env = gain * std::exp(-u * u / (2 * sigma * sigma));
          if (options.iq) {
            out[k] += env * std::polar(1.0, 2 * kPi * (fc * u - fd * time));
          } else {
            out[k] += env * std::cos(2 * kPi * fc * u);
          }
        }
      }
    }
  });

  if (options.relative_noise > 0) {
    double peak = 0;
    for (const auto& v : frame) peak = std::max(peak, std::abs(v));
    std::mt19937 rng(options.seed);
    std::normal_distribution<double> normal(0.0, options.relative_noise * peak);
    for (auto& v : frame) v += options.iq ? std::complex<double>(normal(rng), normal(rng)) : normal(rng);
  }
  if (options.iq) {
    a.data.iq.resize(frame.size());
    for (size_t i = 0; i < frame.size(); ++i) a.data.iq[i] = std::complex<float>(frame[i]);
  } else {
    a.data.rf.resize(frame.size());
    for (size_t i = 0; i < frame.size(); ++i) a.data.rf[i] = static_cast<float>(frame[i].real());
  }
  return a;
}

std::vector<Scatterer> SpecklePhantom(int count, double x_min, double x_max, double z_min, double z_max,
                                      const std::vector<Cyst>& cysts, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> ux(x_min, x_max), uz(z_min, z_max);
  std::normal_distribution<double> amplitude(0.0, 1.0);
  std::vector<Scatterer> out;
  out.reserve(count > 0 ? count : 0);
  for (int i = 0; i < count; ++i) {
    Scatterer s{ux(rng), uz(rng), amplitude(rng)};
    bool inside = false;
    for (const Cyst& c : cysts) inside |= (s.x - c.x) * (s.x - c.x) + (s.z - c.z) * (s.z - c.z) < c.radius * c.radius;
    if (!inside) out.push_back(s);
  }
  return out;
}

}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera
