// The simulator's echoes arrive when the delay convention of acquisition.h
// says (checked by hand-computed delays, independent of the beamformers), the
// FIR analytic signal of RF data has unit gain in band, and the simulator
// refuses bad options.
#include "kernels/reconstruction/ultrasound/simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <vector>

namespace tessera {
namespace recon {
namespace ultrasound {
namespace {

// The sample of the largest |value| on one channel line.
int64_t PeakSample(const Acquisition& a, int channel, int transmit) {
  int64_t best = 0;
  double best_v = -1;
  for (int64_t s = 0; s < a.data.samples; ++s) {
    const int64_t i = s + a.data.samples * (channel + int64_t{a.data.channels} * transmit);
    const double v = a.data.is_iq() ? std::abs(a.data.iq[i]) : std::abs(a.data.rf[i]);
    if (v > best_v) {
      best_v = v;
      best = s;
    }
  }
  return best;
}

TEST(SimulatorTest, EchoesArriveAtTheConventionalDelays) {
  const LinearArray probe = LinearArray::Uniform(8, 0.5e-3, 4e6);
  Sampling sampling;
  sampling.sampling_frequency_hz = 40e6;
  sampling.initial_time_s = 3e-6;
  sampling.sound_speed = 1500;
  sampling.demodulation_frequency_hz = 4e6;
  const Scatterer s{1.2e-3, 12e-3, 1.0};
  const TransmitSequence pw = TransmitSequence::PlaneWaves(3, 0.2);  // -0.2, 0, 0.2 rad
  auto a = Simulate(probe, pw, sampling, 1000, {s});
  ASSERT_TRUE(a.ok()) << a.status();
  for (int t = 0; t < 3; ++t) {
    for (int e : {0, 5, 7}) {
      const double theta = pw.angles_rad[t];
      const double tx = (s.x * std::sin(theta) + s.z * std::cos(theta)) / 1500;
      const double rx = std::hypot(s.x - probe.element_x[e], s.z) / 1500;
      const double expected = (tx + rx - 3e-6) * 40e6;
      EXPECT_NEAR(PeakSample(*a, e, t), expected, 0.51) << "transmit " << t << ", element " << e;
    }
  }
  const TransmitSequence sa = TransmitSequence::SyntheticAperture(8);
  auto b = Simulate(probe, sa, sampling, 1000, {s});
  ASSERT_TRUE(b.ok()) << b.status();
  for (int t : {0, 3, 6}) {
    const double tx = std::hypot(s.x - probe.element_x[t], s.z) / 1500;
    const double rx = std::hypot(s.x - probe.element_x[2], s.z) / 1500;
    EXPECT_NEAR(PeakSample(*b, 2, t), (tx + rx - 3e-6) * 40e6, 0.51) << "transmit element " << t;
  }
}

TEST(SimulatorTest, AnalyticSignalOfRfHasUnitGainInBand) {
  for (const double f : {0.1, 0.25, 0.4}) {  // cycles per sample
    Acquisition a;
    a.data.samples = 400;
    a.data.channels = 1;
    a.data.transmits = 1;
    for (int s = 0; s < 400; ++s) a.data.rf.push_back(static_cast<float>(std::cos(2 * M_PI * f * s + 0.3)));
    const Acquisition b = ToAnalytic(a);
    ASSERT_TRUE(b.data.is_iq());
    for (int s = 64; s < 336; ++s) {
      const std::complex<double> want = std::polar(1.0, 2 * M_PI * f * s + 0.3);
      EXPECT_NEAR(std::abs(std::complex<double>(b.data.iq[s]) - want), 0.0, 0.01) << "f " << f << " sample " << s;
    }
  }
}

TEST(SimulatorTest, BadOptionsAreInvalidArgument) {
  const LinearArray probe = LinearArray::Uniform(4, 0.3e-3, 5e6);
  Sampling sampling;
  sampling.sampling_frequency_hz = 20e6;
  const TransmitSequence seq = TransmitSequence::PlaneWaves(1, 0);
  SimulationOptions o;
  o.fractional_bandwidth = 0;
  EXPECT_EQ(Simulate(probe, seq, sampling, 100, {}, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SimulationOptions();
  o.relative_noise = -1;
  EXPECT_EQ(Simulate(probe, seq, sampling, 100, {}, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = SimulationOptions();
  o.iq = false;
  sampling.demodulation_frequency_hz = 5e6;
  EXPECT_EQ(Simulate(probe, seq, sampling, 100, {}, o).status().code(), absl::StatusCode::kInvalidArgument);
  sampling.demodulation_frequency_hz = 0;
  EXPECT_EQ(Simulate(probe, seq, sampling, 0, {}, o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Simulate(probe, seq, sampling, 100, {{NAN, 1e-2, 1}}, o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera
