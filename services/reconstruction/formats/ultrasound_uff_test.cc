// USTB .uff channel data (ultrasound_uff.h): simulated data written in our
// PICMUS layout, converted by make_ustb_uff.py (h5py, USTB's MATLAB layout)
// and read back through ReadUltrasoundH5 (which hands .uff files to
// ReadUltrasoundUff) must give the same acquisition and the same beamformed
// image as our layout: bit-identical when the .uff stores doubles, within a
// relative l2 of 1e-4 when it stores singles as USTB does (fs, t0, angles and
// element positions rounded to float). Malformed files are INVALID_ARGUMENT
// naming the dataset, a truncated one never crashes.
#include "services/reconstruction/formats/ultrasound_uff.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/device_array.h"
#include "kernels/reconstruction/ultrasound/beamform.h"
#include "kernels/reconstruction/ultrasound/simulator.h"
#include "services/reconstruction/formats/ultrasound_h5.h"

namespace tessera::recon::formats {
namespace {

namespace us = ::tessera::recon::ultrasound;
using ::testing::HasSubstr;

// Debian's interpreter, where python3-h5py installs (./tessera PACKAGES).
constexpr char kPython[] = "/usr/bin/python3";
constexpr char kGenerator[] = "services/reconstruction/formats/make_ustb_uff.py";

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

bool HaveH5py() { return std::system(absl::StrCat(kPython, " -c 'import h5py' 2>/dev/null").c_str()) == 0; }

us::Acquisition Simulated(us::TransmitSequence sequence, bool iq, std::vector<double> delays = {}) {
  sequence.delays_s = std::move(delays);
  const us::LinearArray probe = us::LinearArray::Uniform(32, 0.3e-3, 5.2e6);
  us::Sampling sampling;
  sampling.sampling_frequency_hz = 20.8e6;
  sampling.initial_time_s = 1.3e-6;
  sampling.sound_speed = 1540;
  sampling.demodulation_frequency_hz = iq ? 5.2e6 : 0;
  us::SimulationOptions options;
  options.iq = iq;
  options.relative_noise = 0.05;
  auto a = us::Simulate(probe, sequence, sampling, 500,
                        {{0.0, 8e-3, 1.0}, {1.5e-3, 6e-3, 0.5}, {-2e-3, 12e-3, 0.7}}, options);
  EXPECT_TRUE(a.ok()) << a.status();
  return *a;
}

// Writes `a` in our layout, converts it with the generator's `options` and
// returns the .uff path.
std::string ToUff(const us::Acquisition& a, const std::string& name, const std::string& options = "") {
  const std::string h5 = TempPath(name + ".h5"), uff = TempPath(name + ".uff");
  EXPECT_TRUE(WriteUltrasoundH5(a, h5).ok());
  const std::string cmd = absl::StrCat(kPython, " ", kGenerator, " '", h5, "' '", uff, "' ", options);
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  return uff;
}

std::vector<std::complex<float>> Image(const us::Acquisition& a) {
  const us::ImageGrid grid = us::ImageGrid::Span(48, 64, -4e-3, 4e-3, 4e-3, 14e-3);
  auto image = us::Beamform(a, grid, us::BeamformOptions{});
  EXPECT_TRUE(image.ok()) << image.status();
  return image.ok() ? *image : std::vector<std::complex<float>>{};
}

void ExpectSameAcquisition(const us::Acquisition& got, const us::Acquisition& want) {
  EXPECT_EQ(got.probe.element_x, want.probe.element_x);
  EXPECT_EQ(got.probe.center_frequency_hz, want.probe.center_frequency_hz);
  EXPECT_EQ(got.probe.element_width, want.probe.element_width);
  EXPECT_EQ(got.sequence.kind, want.sequence.kind);
  EXPECT_EQ(got.sequence.angles_rad, want.sequence.angles_rad);
  EXPECT_EQ(got.sequence.elements, want.sequence.elements);
  EXPECT_EQ(got.sequence.delays_s, want.sequence.delays_s);
  EXPECT_EQ(got.sampling.sampling_frequency_hz, want.sampling.sampling_frequency_hz);
  EXPECT_EQ(got.sampling.initial_time_s, want.sampling.initial_time_s);
  EXPECT_EQ(got.sampling.sound_speed, want.sampling.sound_speed);
  EXPECT_EQ(got.sampling.demodulation_frequency_hz, want.sampling.demodulation_frequency_hz);
  EXPECT_EQ(got.data.samples, want.data.samples);
  EXPECT_EQ(got.data.channels, want.data.channels);
  EXPECT_EQ(got.data.transmits, want.data.transmits);
  EXPECT_EQ(got.data.rf, want.data.rf);
  EXPECT_EQ(got.data.iq, want.data.iq);
}

class UltrasoundUffTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!HaveH5py()) GTEST_SKIP() << kPython << " has no h5py (Debian python3-h5py, ./tessera PACKAGES)";
  }
};

TEST_F(UltrasoundUffTest, PlaneWavesWithDelaysInDoublesAreBitIdentical) {
  const us::Acquisition a = Simulated(us::TransmitSequence::PlaneWaves(5, 0.2), /*iq=*/true,
                                      {0.3e-6, -0.2e-6, 0.0, 0.15e-6, 0.4e-6});
  for (const char* options : {"--float64", "--float64 --wavefront --vlen-strings", "--float64 --data-layout compound"}) {
    SCOPED_TRACE(options);
    auto got = ReadUltrasoundH5(ToUff(a, "pw_f64", options));
    ASSERT_TRUE(got.ok()) << got.status();
    ExpectSameAcquisition(*got, a);
    EXPECT_EQ(Image(*got), Image(a));
  }
}

TEST_F(UltrasoundUffTest, SyntheticApertureRfInDoublesIsBitIdentical) {
  // USTB's STA convention (source at the element, delay = distance / c)
  // gives d_t = 0 exactly.
  const us::Acquisition a = Simulated(us::TransmitSequence::SyntheticAperture(32), /*iq=*/false);
  auto got = ReadUltrasoundH5(ToUff(a, "sa_f64", "--float64"));
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameAcquisition(*got, a);
  EXPECT_EQ(Image(*got), Image(a));
}

TEST_F(UltrasoundUffTest, SinglePrecisionAsUstbWritesMatchesWithinTolerance) {
  const std::vector<us::Acquisition> cases = {
      Simulated(us::TransmitSequence::PlaneWaves(5, 0.2), true, {0.3e-6, -0.2e-6, 0.0, 0.15e-6, 0.4e-6}),
      Simulated(us::TransmitSequence::PlaneWaves(3, 0.1), false),
      Simulated(us::TransmitSequence::SyntheticAperture(32), true),
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    auto got = ReadUltrasoundH5(ToUff(cases[i], absl::StrCat("single_", i)));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->sequence.kind, cases[i].sequence.kind);
    EXPECT_EQ(got->sequence.elements, cases[i].sequence.elements);
    EXPECT_EQ(got->data.iq, cases[i].data.iq);  // samples are float in both layouts
    EXPECT_EQ(got->data.rf, cases[i].data.rf);
    const auto want = Image(cases[i]);
    double peak = 0;
    for (const auto& v : want) peak = std::max(peak, static_cast<double>(std::abs(v)));
    EXPECT_GT(peak, 0);  // the targets are in the image
    EXPECT_LT(tessera::testing::RelL2(Image(*got), want), 1e-4);
  }
}

TEST_F(UltrasoundUffTest, OneWaveAndSeveralFramesReadTheFirstFrame) {
  const us::Acquisition one = Simulated(us::TransmitSequence::PlaneWaves(1, 0), true);
  auto got = ReadUltrasoundH5(ToUff(one, "one_wave", "--float64"));
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameAcquisition(*got, one);
  const us::Acquisition a = Simulated(us::TransmitSequence::PlaneWaves(3, 0.1), true);
  for (const char* options : {"--float64 --frames 3", "--float64 --frames 2 --data-layout compound"}) {
    SCOPED_TRACE(options);
    auto frames = ReadUltrasoundH5(ToUff(a, "frames", options));
    ASSERT_TRUE(frames.ok()) << frames.status();
    ExpectSameAcquisition(*frames, a);
  }
}

TEST_F(UltrasoundUffTest, MalformedFilesAreInvalidArgumentNamingTheDataset) {
  const us::Acquisition a = Simulated(us::TransmitSequence::PlaneWaves(3, 0.1), true);
  const struct {
    const char* options;
    const char* message;
  } cases[] = {
      {"--drop channel_data/sampling_frequency", "/channel_data/sampling_frequency is missing"},
      {"--drop channel_data/sequence/sequence_0002/source/azimuth",
       "/channel_data/sequence/sequence_0002/source/azimuth is missing"},
      {"--drop channel_data/data/imag", "/channel_data/data/imag is missing"},
      {"--drop channel_data/probe", "/channel_data/probe is missing"},
      {"--drop channel_data/probe/geometry --drop channel_data/probe/N", "/channel_data/probe/N is missing"},
      {"--set-class channel_data/sequence=uff.point", "/channel_data/sequence has class \"uff.point\""},
      {"--set-class channel_data/probe=uff.curvilinear_array", "(expected uff.linear_array or uff.probe)"},
      {"--set-class channel_data=uff.beamformed_data", "nor a group of class uff.channel_data"},
      {"--drop-last-element", "/channel_data/data is [3][32][500] per frame but the probe has 31 elements"},
      {"--drop channel_data/sequence/sequence_0003", "but the probe has 32 elements and the sequence 2 waves"},
      {"--diverging", "behind the array (diverging and focused waves are not supported"},
      {"--data-layout real", "/channel_data/data is real but modulation_frequency"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.options);
    auto got = ReadUltrasoundH5(ToUff(a, "malformed", c.options));
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << got.status();
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(c.message));
  }
}

TEST_F(UltrasoundUffTest, TruncatedFilesAreErrorsNotCrashes) {
  const us::Acquisition a = Simulated(us::TransmitSequence::PlaneWaves(3, 0.1), true);
  const std::string uff = ToUff(a, "whole", "--float64");
  const auto size = std::filesystem::file_size(uff);
  for (double keep : {0.9, 0.6, 0.3, 0.05}) {
    SCOPED_TRACE(keep);
    const std::string cut = TempPath("truncated.uff");
    std::filesystem::copy_file(uff, cut, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(cut, static_cast<uintmax_t>(size * keep));
    auto got = ReadUltrasoundUff(cut);
    ASSERT_FALSE(got.ok());
    const absl::StatusCode code = got.status().code();
    EXPECT_TRUE(code == absl::StatusCode::kDataLoss || code == absl::StatusCode::kInvalidArgument) << got.status();
    EXPECT_THAT(std::string(got.status().message()), HasSubstr(cut));
  }
  EXPECT_EQ(ReadUltrasoundUff(TempPath("absent.uff")).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tessera::recon::formats
