// CPU beamforming on simulated point targets and speckle: peaks at the
// scatterers, MV narrower than DAS, the covariance against the direct sum,
// MV with L = 1 equal to a boxcar DAS, and argument errors.
#include "kernels/reconstruction/ultrasound/beamform.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <complex>
#include <limits>
#include <random>
#include <vector>

#include "kernels/reconstruction/ultrasound/beamform_kernels.h"
#include "kernels/reconstruction/ultrasound/image_metrics.h"
#include "kernels/reconstruction/ultrasound/simulator.h"

namespace tessera {
namespace recon {
namespace ultrasound {
namespace {

using ::testing::HasSubstr;

constexpr double kFc = 5e6, kC = 1540, kLambda = kC / kFc;

struct Phantom {
  Acquisition acquisition;
  std::vector<Scatterer> targets;
};

Sampling IqSampling() {
  Sampling s;
  s.sampling_frequency_hz = 4 * kFc;
  s.sound_speed = kC;
  s.initial_time_s = 0;
  s.demodulation_frequency_hz = kFc;
  return s;
}

Phantom PointTargets(const TransmitSequence& sequence, int channels, bool iq = true) {
  Phantom p;
  p.targets = {{0.0, 15e-3, 1.0}, {-4e-3, 22e-3, 1.0}, {4.5e-3, 28e-3, 1.0}};
  const LinearArray probe = LinearArray::Uniform(channels, 0.3e-3, kFc);
  Sampling sampling = IqSampling();
  if (!iq) sampling.demodulation_frequency_hz = 0;
  SimulationOptions options;
  options.iq = iq;
  options.relative_noise = 1e-3;
  const int64_t samples = SamplesForDepth(probe, sequence, sampling, 32e-3);
  auto a = Simulate(probe, sequence, sampling, samples, p.targets, options);
  EXPECT_TRUE(a.ok()) << a.status();
  p.acquisition = *std::move(a);
  return p;
}

ImageGrid TargetGrid() { return ImageGrid::Span(121, 171, -6e-3, 6e-3, 13e-3, 30e-3); }

std::vector<std::complex<float>> BeamformOnCpu(const Acquisition& a, const ImageGrid& grid, const BeamformOptions& options) {
  auto image = Beamform(a, grid, options, Backend::kCpu);
  EXPECT_TRUE(image.ok()) << image.status();
  return image.ok() ? *image : std::vector<std::complex<float>>();
}

BeamformOptions Das() {
  BeamformOptions o;
  o.method = BeamformMethod::kDelayAndSum;
  o.das.f_number = 1.5;
  return o;
}

BeamformOptions Mv(int subarray) {
  BeamformOptions o;
  o.method = BeamformMethod::kMinimumVariance;
  o.mv.subarray = subarray;
  o.mv.loading = 1e-2;
  o.mv.temporal_half = 1;
  return o;
}

void ExpectPeaksAtTargets(const std::vector<std::complex<float>>& image, const ImageGrid& grid,
                          const std::vector<Scatterer>& targets, const char* what) {
  for (const Scatterer& s : targets) {
    const Peak peak = FindPeak(image, grid, s.x, s.z, 2e-3);
    ASSERT_GE(peak.ix, 0);
    EXPECT_LE(std::hypot(peak.x - s.x, peak.z - s.z), kLambda / 2)
        << what << ": target at (" << s.x * 1e3 << ", " << s.z * 1e3 << ") mm, peak at (" << peak.x * 1e3 << ", "
        << peak.z * 1e3 << ") mm";
  }
}

TEST(BeamformTest, PlaneWavePeaksAtScatterersAndMvIsNarrower) {
  const Phantom p = PointTargets(TransmitSequence::PlaneWaves(5, 8 * M_PI / 180), 64);
  const ImageGrid grid = TargetGrid();
  const auto das = BeamformOnCpu(p.acquisition, grid, Das());
  const auto mv = BeamformOnCpu(p.acquisition, grid, Mv(24));
  ExpectPeaksAtTargets(das, grid, p.targets, "das");
  ExpectPeaksAtTargets(mv, grid, p.targets, "mv");
  for (const Scatterer& s : p.targets) {
    const double fwhm_das = LateralFwhm(das, grid, FindPeak(das, grid, s.x, s.z, 2e-3));
    const double fwhm_mv = LateralFwhm(mv, grid, FindPeak(mv, grid, s.x, s.z, 2e-3));
    std::printf("target (%.1f, %.1f) mm: lateral FWHM das %.3f mm, mv %.3f mm, ratio %.3f\n", s.x * 1e3, s.z * 1e3,
                fwhm_das * 1e3, fwhm_mv * 1e3, fwhm_mv / fwhm_das);
    EXPECT_LT(fwhm_mv, 0.5 * fwhm_das) << "target at z = " << s.z * 1e3 << " mm";
  }
}

TEST(BeamformTest, SyntheticAperturePeaksAtScatterers) {
  const Phantom p = PointTargets(TransmitSequence::SyntheticAperture(32), 32);
  const ImageGrid grid = TargetGrid();
  ExpectPeaksAtTargets(BeamformOnCpu(p.acquisition, grid, Das()), grid, p.targets, "das");
  ExpectPeaksAtTargets(BeamformOnCpu(p.acquisition, grid, Mv(12)), grid, p.targets, "mv");
}

TEST(BeamformTest, RfDataIsBeamformedThroughItsAnalyticSignal) {
  const Phantom p = PointTargets(TransmitSequence::PlaneWaves(3, 5 * M_PI / 180), 48, /*iq=*/false);
  ASSERT_FALSE(p.acquisition.data.is_iq());
  const ImageGrid grid = TargetGrid();
  ExpectPeaksAtTargets(BeamformOnCpu(p.acquisition, grid, Das()), grid, p.targets, "das rf");
  ExpectPeaksAtTargets(BeamformOnCpu(p.acquisition, grid, Mv(16)), grid, p.targets, "mv rf");
}

TEST(BeamformTest, MvContrastOfAnAnechoicCystIsAtLeastDas) {
  const LinearArray probe = LinearArray::Uniform(64, 0.3e-3, kFc);
  const TransmitSequence sequence = TransmitSequence::PlaneWaves(3, 6 * M_PI / 180);
  const Sampling sampling = IqSampling();
  const Cyst cyst{0.0, 20e-3, 2.5e-3};
  const auto speckle = SpecklePhantom(3000, -6e-3, 6e-3, 14e-3, 26e-3, {cyst}, 7);
  auto a = Simulate(probe, sequence, sampling, SamplesForDepth(probe, sequence, sampling, 27e-3), speckle);
  ASSERT_TRUE(a.ok()) << a.status();
  const ImageGrid grid = ImageGrid::Span(81, 121, -5e-3, 5e-3, 15e-3, 25e-3);
  const auto das = BeamformOnCpu(*a, grid, Das());
  const auto mv = BeamformOnCpu(*a, grid, Mv(24));
  const double c_das = CystContrastDb(das, grid, cyst.x, cyst.z, 1.5e-3, 3.5e-3, 5e-3);
  const double c_mv = CystContrastDb(mv, grid, cyst.x, cyst.z, 1.5e-3, 3.5e-3, 5e-3);
  std::printf("cyst contrast: das %.1f dB, mv %.1f dB\n", c_das, c_mv);
  EXPECT_LT(c_das, -10);
  EXPECT_LT(c_mv, c_das + 1.0);
}

// The sliding-window covariance against the plain subarray sum.
TEST(BeamformTest, CovarianceMatchesTheDirectSubarraySum) {
  detail::BeamformParams p;
  p.channels = 20;
  p.nx = 2;
  p.nz = 5;
  detail::MvChunk chunk;
  chunk.cols = 2;
  chunk.subarray = 7;
  chunk.temporal_half = 2;
  chunk.loading = 0.1f;
  const int n = p.channels, l = chunk.subarray, m = n - l + 1;
  const int64_t pixels = chunk.pixels(p);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<detail::CFloat> x(pixels * n);
  for (auto& v : x) v = {u(rng), u(rng)};
  std::vector<detail::CFloat> r(pixels * l * l, {std::nanf(""), std::nanf("")});
  detail::cpu::Covariance(p, chunk, x.data(), r.data());
  for (int64_t q = 0; q < pixels; ++q) {
    const int iz = static_cast<int>(q % p.nz);
    std::vector<std::complex<double>> direct(l * l, 0.0);
    for (int k = -chunk.temporal_half; k <= chunk.temporal_half; ++k) {
      if (iz + k < 0 || iz + k >= p.nz) continue;
      for (int s = 0; s < m; ++s) {
        for (int j = 0; j < l; ++j) {
          for (int i = 0; i < l; ++i) {
            const detail::CFloat a = x[(q + k) * n + s + i], b = x[(q + k) * n + s + j];
            direct[i + j * l] += std::complex<double>(a.re, a.im) * std::conj(std::complex<double>(b.re, b.im));
          }
        }
      }
    }
    double trace = 0;
    for (int i = 0; i < l; ++i) trace += direct[i + i * l].real();
    for (int i = 0; i < l; ++i) direct[i + i * l] += chunk.loading * trace / l;
    for (int j = 0; j < l; ++j) {
      for (int i = j; i < l; ++i) {
        const detail::CFloat got = r[q * l * l + i + j * l];
        EXPECT_NEAR(got.re, direct[i + j * l].real(), 1e-4 * trace) << "pixel " << q << " R(" << i << "," << j << ")";
        EXPECT_NEAR(got.im, direct[i + j * l].imag(), 1e-4 * trace) << "pixel " << q << " R(" << i << "," << j << ")";
      }
    }
  }
}

// With L = 1 every weight is 1, so MV is the mean over channels: a boxcar
// DAS over the whole array.
TEST(BeamformTest, MvWithSubarrayOneIsBoxcarDas) {
  const Phantom p = PointTargets(TransmitSequence::PlaneWaves(3, 5 * M_PI / 180), 32);
  const ImageGrid grid = ImageGrid::Span(41, 61, -4e-3, 4e-3, 13e-3, 17e-3);
  BeamformOptions das = Das();
  das.das.window = Apodization::kBoxcar;
  das.das.f_number = 0;
  const auto a = BeamformOnCpu(p.acquisition, grid, das);
  const auto b = BeamformOnCpu(p.acquisition, grid, Mv(1));
  ASSERT_EQ(a.size(), b.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += std::norm(a[i] - b[i]);
    den += std::norm(a[i]);
  }
  ASSERT_GT(den, 0);
  EXPECT_LT(std::sqrt(num / den), 1e-5);
}

// Chunks of columns give the same image as one chunk.
TEST(BeamformTest, MvChunksDoNotChangeTheImage) {
  const Phantom p = PointTargets(TransmitSequence::PlaneWaves(1, 0), 32);
  const ImageGrid grid = ImageGrid::Span(23, 40, -3e-3, 3e-3, 13e-3, 17e-3);
  BeamformOptions one = Mv(8), many = Mv(8);
  many.mv.chunk_pixels = 3 * grid.nz + 5;  // 3 columns per chunk, ragged last chunk
  const auto a = BeamformOnCpu(p.acquisition, grid, one);
  const auto b = BeamformOnCpu(p.acquisition, grid, many);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << "pixel " << i;
}

double RelativeL2(const std::vector<std::complex<float>>& a, const std::vector<std::complex<float>>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += std::norm(std::complex<double>(a[i]) - std::complex<double>(b[i]));
    den += std::norm(std::complex<double>(b[i]));
  }
  return std::sqrt(num / den);
}

// Per-transmit recording delays (USTB's uff.wave.delay): data recorded d_t
// late, beamformed with d_t, give the image of the same scene recorded
// without delays; whole-sample delays shift the sampling grid exactly, so
// only rounding differs. Ignoring the delays ruins the image.
TEST(BeamformTest, TransmitDelaysAreHonoured) {
  const LinearArray probe = LinearArray::Uniform(48, 0.3e-3, kFc);
  TransmitSequence plain = TransmitSequence::PlaneWaves(3, 0.15);
  TransmitSequence delayed = plain;
  const double ts = 1 / IqSampling().sampling_frequency_hz;
  delayed.delays_s = {7 * ts, -5 * ts, 11 * ts};
  const std::vector<Scatterer> targets = {{0.0, 15e-3, 1.0}, {-3e-3, 22e-3, 0.8}};
  const int64_t samples = SamplesForDepth(probe, plain, IqSampling(), 32e-3) + 16;
  Sampling late = IqSampling();
  late.initial_time_s = 8 * ts;  // every echo stays inside the record
  auto a = Simulate(probe, plain, late, samples, targets);
  auto b = Simulate(probe, delayed, late, samples, targets);
  ASSERT_TRUE(a.ok() && b.ok());
  const ImageGrid grid = TargetGrid();
  const auto want = BeamformOnCpu(*a, grid, BeamformOptions());
  EXPECT_LT(RelativeL2(BeamformOnCpu(*b, grid, BeamformOptions()), want), 1e-4);
  Acquisition ignored = *b;
  ignored.sequence.delays_s.clear();
  EXPECT_GT(RelativeL2(BeamformOnCpu(ignored, grid, BeamformOptions()), want), 0.3);
}

TEST(BeamformTest, BadInputsAreInvalidArgumentNamingTheField) {
  const Phantom p = PointTargets(TransmitSequence::PlaneWaves(2, 0.1), 16);
  const ImageGrid grid = ImageGrid::Span(8, 8, -1e-3, 1e-3, 14e-3, 16e-3);
  auto expect_error = [&](const Acquisition& a, const ImageGrid& g, const BeamformOptions& o, const char* field) {
    auto r = Beamform(a, g, o, Backend::kCpu);
    ASSERT_FALSE(r.ok()) << field;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_THAT(std::string(r.status().message()), HasSubstr(field));
  };
  BeamformOptions o = Mv(17);
  expect_error(p.acquisition, grid, o, "mv.subarray");
  o = Mv(4);
  o.mv.loading = -1;
  expect_error(p.acquisition, grid, o, "mv.loading");
  o.mv.loading = std::nan("");
  expect_error(p.acquisition, grid, o, "mv.loading");
  o = Mv(4);
  o.mv.temporal_half = -1;
  expect_error(p.acquisition, grid, o, "mv.temporal_half");
  o = Das();
  o.das.f_number = -0.5;
  expect_error(p.acquisition, grid, o, "das.f_number");

  Acquisition a = p.acquisition;
  a.data.iq[5 + a.data.samples * 3] = std::complex<float>(std::nanf(""), 0);
  expect_error(a, grid, Das(), "sample 5 of channel 3, transmit 0");
  a = p.acquisition;
  a.data.iq.pop_back();
  expect_error(a, grid, Das(), "channel data");
  a = p.acquisition;
  a.data.channels = 15;
  expect_error(a, grid, Das(), "channel data: shape");
  a = p.acquisition;
  a.sequence.angles_rad[1] = 2.0;
  expect_error(a, grid, Das(), "angles_rad[1]");
  a = p.acquisition;
  a.sequence.delays_s = {1e-6};
  expect_error(a, grid, Das(), "1 delays_s for");
  a.sequence.delays_s.assign(a.sequence.transmits(), 0.0);
  a.sequence.delays_s.back() = std::numeric_limits<double>::infinity();
  expect_error(a, grid, Das(), "delays_s[");
  a = p.acquisition;
  a.sampling.sound_speed = 0;
  expect_error(a, grid, Das(), "sound_speed");
  a = p.acquisition;
  a.probe.element_x[4] = a.probe.element_x[3];
  expect_error(a, grid, Das(), "element_x[4]");
  ImageGrid g = grid;
  g.nx = 0;
  expect_error(p.acquisition, g, Das(), "image grid");
  g = grid;
  g.dz = -1;
  expect_error(p.acquisition, g, Das(), "image grid");
}

}  // namespace
}  // namespace ultrasound
}  // namespace recon
}  // namespace tessera
