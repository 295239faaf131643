// The PICMUS-layout HDF5 reader/writer (round trips of plane-wave IQ and RF
// and synthetic-aperture data, a PICMUS-style file written with the plain
// HDF5 API, damaged and incomplete files) and the B-mode NIfTI/PNG writers.
#include "services/reconstruction/formats/ultrasound_h5.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hdf5.h>

#include <cmath>
#include <complex>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/nifti_io.h"
#include "common/png_io.h"
#include "kernels/reconstruction/ultrasound/beamform.h"
#include "kernels/reconstruction/ultrasound/simulator.h"
#include "services/reconstruction/formats/ultrasound_image.h"

namespace tessera::recon::formats {
namespace {

namespace us = ::tessera::recon::ultrasound;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

us::Acquisition Simulated(const us::TransmitSequence& sequence, bool iq) {
  const us::LinearArray probe = us::LinearArray::Uniform(16, 0.3e-3, 5e6);
  us::Sampling sampling;
  sampling.sampling_frequency_hz = 20e6;
  sampling.initial_time_s = 1.5e-6;
  sampling.demodulation_frequency_hz = iq ? 5e6 : 0;
  us::SimulationOptions options;
  options.iq = iq;
  options.relative_noise = 0.01;
  auto a = us::Simulate(probe, sequence, sampling, 300, {{0.0, 8e-3, 1.0}, {1e-3, 6e-3, 0.5}}, options);
  EXPECT_TRUE(a.ok()) << a.status();
  return *a;
}

us::TransmitSequence WithDelays(us::TransmitSequence sequence, std::vector<double> delays) {
  sequence.delays_s = std::move(delays);
  return sequence;
}

void ExpectSame(const us::Acquisition& got, const us::Acquisition& want) {
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

TEST(UltrasoundH5Test, RoundTripsPlaneWaveIqRfAndSyntheticAperture) {
  const std::vector<us::Acquisition> cases = {
      Simulated(us::TransmitSequence::PlaneWaves(3, 0.1), /*iq=*/true),
      Simulated(us::TransmitSequence::PlaneWaves(2, 0.05), /*iq=*/false),
      Simulated(us::TransmitSequence::SyntheticAperture(16), /*iq=*/true),
      Simulated(WithDelays(us::TransmitSequence::PlaneWaves(3, 0.1), {0.2e-6, -0.1e-6, 0.35e-6}), /*iq=*/true),
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string path = TempPath("round_trip_" + std::to_string(i) + ".h5");
    ASSERT_TRUE(WriteUltrasoundH5(cases[i], path).ok());
    auto back = ReadUltrasoundH5(path);
    ASSERT_TRUE(back.ok()) << back.status();
    ExpectSame(*back, cases[i]);
  }
}

// A file as PICMUS ships it: float32 [1] scalars, no Tessera additions, RF
// with an all-zero imag, geometry [3][channels].
TEST(UltrasoundH5Test, ReadsAPicmusStyleFile) {
  const std::string path = TempPath("picmus.hdf5");
  const int n = 4, t = 2, s = 5;
  {
    hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t us_group = H5Gcreate2(f, "/US", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t g = H5Gcreate2(f, "/US/US_DATASET0000", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t dg = H5Gcreate2(g, "data", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    auto put = [](hid_t loc, const char* name, std::vector<hsize_t> dims, const std::vector<float>& v) {
      hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
      hid_t d = H5Dcreate2(loc, name, H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
      H5Dclose(d);
      H5Sclose(space);
    };
    put(g, "angles", {t}, {-0.1f, 0.1f});
    put(g, "probe_geometry", {3, n}, {-0.45e-3f, -0.15e-3f, 0.15e-3f, 0.45e-3f, 0, 0, 0, 0, 0, 0, 0, 0});
    put(g, "sampling_frequency", {1}, {20.832e6f});
    put(g, "initial_time", {1}, {0.0f});
    put(g, "sound_speed", {1}, {1540.0f});
    put(g, "modulation_frequency", {1}, {0.0f});
    std::vector<float> real(t * n * s), imag(t * n * s, 0.0f);
    for (size_t i = 0; i < real.size(); ++i) real[i] = static_cast<float>(i) - 7.5f;
    put(dg, "real", {t, n, s}, real);
    put(dg, "imag", {t, n, s}, imag);
    H5Gclose(dg);
    H5Gclose(g);
    H5Gclose(us_group);
    H5Fclose(f);
  }
  auto a = ReadUltrasoundH5(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->data.is_iq());
  EXPECT_EQ(a->data.samples, s);
  EXPECT_EQ(a->data.channels, n);
  EXPECT_EQ(a->data.transmits, t);
  EXPECT_EQ(a->data.rf[s * (1 + n * 1) + 2], static_cast<float>(s * (1 + n * 1) + 2) - 7.5f);  // (s 2, c 1, t 1)
  EXPECT_FLOAT_EQ(a->probe.element_x[3], 0.45e-3f);
  EXPECT_FLOAT_EQ(a->sampling.sampling_frequency_hz, 20.832e6f);
  EXPECT_FLOAT_EQ(a->probe.center_frequency_hz, 20.832e6f / 4);  // no centre frequency, no modulation
  EXPECT_EQ(a->sequence.kind, us::TransmitKind::kPlaneWave);
}

absl::Status ReadAfter(const std::string& name, const std::function<void(hid_t)>& damage) {
  const std::string path = TempPath(name);
  EXPECT_TRUE(WriteUltrasoundH5(Simulated(us::TransmitSequence::PlaneWaves(2, 0.1), true), path).ok());
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  damage(f);
  H5Fclose(f);
  return ReadUltrasoundH5(path).status();
}

TEST(UltrasoundH5Test, MissingAndMisshapedDatasetsAreNamed) {
  for (const char* name : {"sound_speed", "angles", "probe_geometry", "data/real", "initial_time"}) {
    const std::string link = std::string("/US/US_DATASET0000/") + name;
    const absl::Status s = ReadAfter("missing.h5", [&](hid_t f) { H5Ldelete(f, link.c_str(), H5P_DEFAULT); });
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(link + " is missing"));
  }
  const absl::Status shape = ReadAfter("shape.h5", [](hid_t f) {
    H5Ldelete(f, "/US/US_DATASET0000/data/real", H5P_DEFAULT);
    const hsize_t dims[2] = {2, 16};
    std::vector<float> v(32, 1.0f);
    hid_t space = H5Screate_simple(2, dims, nullptr);
    hid_t d = H5Dcreate2(f, "/US/US_DATASET0000/data/real", H5T_IEEE_F32LE, space, H5P_DEFAULT, H5P_DEFAULT,
                         H5P_DEFAULT);
    H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data());
    H5Dclose(d);
    H5Sclose(space);
  });
  EXPECT_EQ(shape.code(), absl::StatusCode::kInvalidArgument) << shape;
  EXPECT_THAT(std::string(shape.message()), HasSubstr("data/real is [2][16]"));
  const absl::Status group = ReadAfter("group.h5", [](hid_t f) { H5Ldelete(f, "/US/US_DATASET0000", H5P_DEFAULT); });
  EXPECT_EQ(group.code(), absl::StatusCode::kInvalidArgument) << group;
  EXPECT_THAT(std::string(group.message()), HasSubstr("neither a /US/US_DATASET0000 group"));
}

TEST(UltrasoundH5Test, MissingNotHdf5AndTruncatedFiles) {
  EXPECT_EQ(ReadUltrasoundH5(TempPath("nope.h5")).status().code(), absl::StatusCode::kNotFound);
  const std::string text = TempPath("text.h5");
  std::ofstream(text) << "not an hdf5 file\n";
  EXPECT_EQ(ReadUltrasoundH5(text).status().code(), absl::StatusCode::kInvalidArgument);

  const std::string path = TempPath("truncated.h5");
  ASSERT_TRUE(WriteUltrasoundH5(Simulated(us::TransmitSequence::PlaneWaves(3, 0.1), true), path).ok());
  std::filesystem::resize_file(path, std::filesystem::file_size(path) / 2);
  const absl::Status s = ReadUltrasoundH5(path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(path));
}

TEST(UltrasoundH5Test, WriteRefusesInvalidAcquisitions) {
  us::Acquisition a = Simulated(us::TransmitSequence::PlaneWaves(2, 0.1), true);
  a.data.iq[3] = {std::nanf(""), 0.0f};
  const absl::Status s = WriteUltrasoundH5(a, TempPath("bad.h5"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(TempPath("bad.h5")));
}

TEST(UltrasoundImageTest, NiftiAndPngHoldTheLogCompressedImage) {
  const us::Acquisition a = Simulated(us::TransmitSequence::PlaneWaves(3, 0.1), true);
  const us::ImageGrid grid = us::ImageGrid::Span(21, 31, -1.5e-3, 1.5e-3, 6.5e-3, 9.5e-3);
  auto image = us::Beamform(a, grid, us::BeamformOptions(), Backend::kCpu);
  ASSERT_TRUE(image.ok()) << image.status();

  const std::string nii = TempPath("bmode.nii.gz");
  ASSERT_TRUE(WriteBModeNifti(*image, grid, 50, nii).ok());
  auto volume = ReadNifti(nii);
  ASSERT_TRUE(volume.ok()) << volume.status();
  EXPECT_EQ(volume->data.shape(), (Shape{21, 31, 1}));
  EXPECT_NEAR(volume->geometry.spacing[0], grid.dx * 1e3, 1e-6);
  EXPECT_NEAR(volume->geometry.spacing[1], grid.dz * 1e3, 1e-6);
  const Mat4 m = volume->geometry.IndexToWorld();
  EXPECT_NEAR(m[11], -grid.z0 * 1e3, 1e-4);  // world z of row 0 = -depth
  float max_db = -1000, min_db = 1000;
  const float* v = volume->data.data<float>();
  for (int64_t i = 0; i < volume->data.num_elements(); ++i) {
    max_db = std::max(max_db, v[i]);
    min_db = std::min(min_db, v[i]);
  }
  EXPECT_EQ(max_db, 0.0f);
  EXPECT_GE(min_db, -50.0f);
  EXPECT_LT(min_db, -10.0f);

  const std::string png = TempPath("bmode.png");
  ASSERT_TRUE(WriteBModePng(*image, grid, 40, png).ok());
  auto back = ReadPng(png);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->width, 21);
  EXPECT_EQ(back->height, 31);
  // The scatterer at (0, 8 mm) is the brightest pixel: column 10, row 15.
  EXPECT_EQ(back->at(10, 15), 255);
  EXPECT_LT(back->at(0, 0), 200);

  EXPECT_EQ(WriteBModePng(*image, grid, 0, png).code(), absl::StatusCode::kInvalidArgument);
  std::vector<std::complex<float>> wrong(5);
  EXPECT_EQ(WriteBModeNifti(wrong, grid, 40, nii).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::recon::formats
