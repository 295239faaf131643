// ISMRMRD reader: small datasets written with the ISMRMRD C++ API in the test
// and read back: Cartesian lines (noise scan skipped, oversampled readout
// cropped around center_sample, lines placed by the encoding limits' centre),
// radial readouts with trajectories in both unit conventions; malformed and
// inconsistent files give clear errors.
#include "services/reconstruction/formats/ismrmrd_reader.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "common/testing/temp_files.h"
#include "ismrmrd/dataset.h"
#include "ismrmrd/ismrmrd.h"
#include "ismrmrd/xml.h"

namespace tessera::recon::formats {
namespace {

using Complex = std::complex<float>;
using ::tessera::testing::TestTmpPath;

std::string HeaderXml(int nx, int ny, bool cartesian) {
  ISMRMRD::IsmrmrdHeader h;
  ISMRMRD::Encoding e;
  e.encodedSpace.matrixSize = ISMRMRD::MatrixSize(nx, ny, 1);
  e.encodedSpace.fieldOfView_mm = {200, 150, 5};
  e.reconSpace = e.encodedSpace;
  e.trajectory = cartesian ? ISMRMRD::TrajectoryType::CARTESIAN : ISMRMRD::TrajectoryType::RADIAL;
  // Lines numbered 0..ny-1 with the centre at ny/2 - 1 (off by one from ny/2,
  // so placement must use it).
  e.encodingLimits.kspace_encoding_step_1 = ISMRMRD::Limit(0, ny - 1, ny / 2 - 1);
  h.encoding.push_back(e);
  h.experimentalConditions.H1resonanceFrequency_Hz = 63500000;
  std::ostringstream xml;
  ISMRMRD::serialize(h, xml);
  return xml.str();
}

Complex Value(int s, int line, int c) { return Complex(0.5f + s + 100 * line, 1.0f + c); }

std::string WriteCartesian(const std::string& name, int nx, int ny, int coils) {
  const std::string path = TestTmpPath(name);
  std::remove(path.c_str());
  ISMRMRD::Dataset d(path.c_str(), "dataset", true);
  d.writeHeader(HeaderXml(nx, ny, true));
  ISMRMRD::Acquisition noise(2 * nx, coils);
  noise.setFlag(ISMRMRD::ISMRMRD_ACQ_IS_NOISE_MEASUREMENT);
  d.appendAcquisition(noise);
  for (int line = 0; line < ny; line += 2) {  // every other line: R = 2
    ISMRMRD::Acquisition acq(2 * nx, coils);  // 2x oversampled readout
    acq.center_sample() = nx;
    acq.idx().kspace_encode_step_1 = line;
    for (int c = 0; c < coils; ++c) {
      for (int s = 0; s < 2 * nx; ++s) acq.data(s, c) = Value(s, line, c);
    }
    d.appendAcquisition(acq);
  }
  return path;
}

TEST(IsmrmrdReader, CartesianLinesArePlaced) {
  const int nx = 8, ny = 6, coils = 3;
  const std::string path = WriteCartesian("cart.h5", nx, ny, coils);
  auto raw = ReadIsmrmrd(path);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_TRUE(raw->cartesian);
  EXPECT_EQ(raw->coils, coils);
  EXPECT_EQ(raw->matrix[0], nx);
  EXPECT_EQ(raw->matrix[1], ny);
  EXPECT_DOUBLE_EQ(raw->fov_mm[0], 200);
  EXPECT_EQ(raw->acquisitions_read, ny / 2);
  EXPECT_EQ(raw->acquisitions_skipped, 1);
  EXPECT_EQ(raw->kspace.dim(0), nx);
  EXPECT_EQ(raw->kspace.dim(1), ny);
  EXPECT_EQ(raw->kspace.dim(kCoilDim), coils);
  for (int c = 0; c < coils; ++c) {
    for (int line = 0; line < ny; ++line) {
      const int y = line - (ny / 2 - 1) + ny / 2;  // shifted by the limit's centre
      if (y < 0 || y >= ny) continue;
      for (int x = 0; x < nx; ++x) {
        const Complex got = raw->kspace.data[x + nx * (y + ny * c)];
        const int s = x - nx / 2 + nx;  // sample at x, center_sample nx
        EXPECT_EQ(got, line % 2 == 0 ? Value(s, line, c) : Complex(0, 0)) << x << " " << line << " " << c;
      }
    }
  }
}

TEST(IsmrmrdReader, RadialTrajectoriesInBothUnits) {
  const int n = 16, samples = 32, spokes = 4, coils = 2;
  const std::string path = TestTmpPath("radial.h5");
  std::remove(path.c_str());
  {
    ISMRMRD::Dataset d(path.c_str(), "dataset", true);
    d.writeHeader(HeaderXml(n, n, false));
    for (int r = 0; r < spokes; ++r) {
      ISMRMRD::Acquisition acq(samples, coils, 2);
      for (int s = 0; s < samples; ++s) {
        acq.traj(0, s) = (s - samples / 2) / static_cast<float>(samples) * (r % 2 ? 1.f : 0.f);
        acq.traj(1, s) = (s - samples / 2) / static_cast<float>(samples) * (r % 2 ? 0.f : 1.f);
        for (int c = 0; c < coils; ++c) acq.data(s, c) = Value(s, r, c);
      }
      d.appendAcquisition(acq);
    }
  }
  auto raw = ReadIsmrmrd(path);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_FALSE(raw->cartesian);
  EXPECT_EQ(raw->kspace.dim(0), 1);
  EXPECT_EQ(raw->kspace.dim(1), samples);
  EXPECT_EQ(raw->kspace.dim(2), spokes);
  EXPECT_EQ(raw->kspace.dim(3), coils);
  EXPECT_EQ(raw->kspace.data[5 + samples * (2 + spokes * 1)], Value(5, 2, 1));
  auto traj = TrajectoryFromCfl(raw->trajectory);
  ASSERT_TRUE(traj.ok()) << traj.status();
  EXPECT_FLOAT_EQ(traj->ky[0], -8.0f);  // -0.5 x matrix 16: BART's -N/2
  EXPECT_FLOAT_EQ(traj->kx[samples + 31], 15 / 32.0f * 16);
  IsmrmrdReadOptions as_is;
  as_is.trajectory_units = IsmrmrdTrajectoryUnits::kCyclesPerFov;
  auto raw2 = ReadIsmrmrd(path, as_is);
  ASSERT_TRUE(raw2.ok());
  EXPECT_FLOAT_EQ(raw2->trajectory.data[1].real(), -0.5f);
}

// Issue 40: radial readouts of 2 slices x 3 repetitions, interleaved in the
// file, become k-space 1 x samples x spokes x coils with TIME_DIM 3 and
// SLICE_DIM 2 (each image's readouts in file order) and one trajectory;
// another trajectory or a missing readout in one image is refused.
std::string WriteRadialStack(const std::string& name, bool other_trajectory, bool drop_one) {
  const std::string path = TestTmpPath(name);
  std::remove(path.c_str());
  ISMRMRD::Dataset d(path.c_str(), "dataset", true);
  d.writeHeader(HeaderXml(16, 16, false));
  for (int r = 0; r < 4; ++r) {
    for (int slice = 0; slice < 2; ++slice) {
      for (int rep = 0; rep < 3; ++rep) {
        if (drop_one && r == 3 && slice == 1 && rep == 2) continue;
        ISMRMRD::Acquisition acq(32, 2, 2);
        acq.idx().slice = slice;
        acq.idx().repetition = rep;
        for (int s = 0; s < 32; ++s) {
          acq.traj(0, s) = (s - 16) / 32.f * (r + 1) / 4.f;
          acq.traj(1, s) = (other_trajectory && slice == 1 && r == 2) ? 0.25f : 0.f;
          for (int c = 0; c < 2; ++c) acq.data(s, c) = Value(s, r, c) + Complex(1000.f * (rep + 3 * slice), 0);
        }
        d.appendAcquisition(acq);
      }
    }
  }
  return path;
}

TEST(IsmrmrdReader, RadialSlicesAndRepetitionsAreAStack) {
  auto raw = ReadIsmrmrd(WriteRadialStack("stack.h5", false, false));
  ASSERT_TRUE(raw.ok()) << raw.status();
  const CflArray& k = raw->kspace;
  EXPECT_EQ(k.dim(1), 32);
  EXPECT_EQ(k.dim(2), 4);
  EXPECT_EQ(k.dim(kCoilDim), 2);
  EXPECT_EQ(k.dim(kTimeDim), 3);
  EXPECT_EQ(k.dim(kSliceDim), 2);
  for (int i = 0; i < 6; ++i) {
    for (int c = 0; c < 2; ++c) {
      for (int r = 0; r < 4; ++r) {
        for (int s = 0; s < 32; s += 7) {
          EXPECT_EQ(k.data[s + 32 * (r + 4 * (c + 2 * i))], Value(s, r, c) + Complex(1000.f * i, 0))
              << "image " << i << " coil " << c << " readout " << r << " sample " << s;
        }
      }
    }
  }
  EXPECT_EQ(raw->trajectory.dim(2), 4);
  EXPECT_EQ(raw->trajectory.elements(), 3 * 32 * 4);
  EXPECT_FLOAT_EQ(raw->trajectory.data[3 * (1 + 32 * 3)].real(), -15 / 32.f * 16);

  auto status = ReadIsmrmrd(WriteRadialStack("stack_traj.h5", true, false)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("(slice 1 repetition 0) has another trajectory than readout 2"), std::string::npos)
      << status;
  status = ReadIsmrmrd(WriteRadialStack("stack_short.h5", false, true)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("slice 1 repetition 2 has 3 readouts, slice 0 repetition 0 has 4"), std::string::npos)
      << status;
}

TEST(IsmrmrdReader, MalformedAndInconsistentFiles) {
  EXPECT_EQ(ReadIsmrmrd(TestTmpPath("absent.h5")).status().code(), absl::StatusCode::kNotFound);
  const std::string text = TestTmpPath("not_hdf5.h5");
  std::ofstream(text) << "this is not HDF5\n";
  auto status = ReadIsmrmrd(text).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not_hdf5.h5"), std::string::npos) << status;

  const std::string cart = WriteCartesian("group.h5", 8, 6, 2);
  IsmrmrdReadOptions other_group;
  other_group.group = "nope";
  EXPECT_EQ(ReadIsmrmrd(cart, other_group).status().code(), absl::StatusCode::kInvalidArgument);

  const std::string empty = TestTmpPath("empty.h5");
  std::remove(empty.c_str());
  {
    ISMRMRD::Dataset d(empty.c_str(), "dataset", true);
    d.writeHeader(HeaderXml(8, 8, true));
  }
  status = ReadIsmrmrd(empty).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("no imaging acquisitions"), std::string::npos) << status;

  const std::string mixed = TestTmpPath("mixed.h5");
  std::remove(mixed.c_str());
  {
    ISMRMRD::Dataset d(mixed.c_str(), "dataset", true);
    d.writeHeader(HeaderXml(8, 8, true));
    ISMRMRD::Acquisition a(8, 2), b(8, 3);
    d.appendAcquisition(a);
    d.appendAcquisition(b);
  }
  status = ReadIsmrmrd(mixed).status();
  EXPECT_NE(status.message().find("channels"), std::string::npos) << status;

  const std::string slices = TestTmpPath("slices.h5");
  std::remove(slices.c_str());
  {
    ISMRMRD::Dataset d(slices.c_str(), "dataset", true);
    d.writeHeader(HeaderXml(8, 8, true));
    ISMRMRD::Acquisition a(8, 2);
    a.idx().slice = 1;
    d.appendAcquisition(a);
  }
  status = ReadIsmrmrd(slices).status();
  EXPECT_NE(status.message().find("slice 1"), std::string::npos) << status;

  const std::string bad_xml = TestTmpPath("bad_xml.h5");
  std::remove(bad_xml.c_str());
  {
    ISMRMRD::Dataset d(bad_xml.c_str(), "dataset", true);
    d.writeHeader("<ismrmrdHeader><broken");
    d.appendAcquisition(ISMRMRD::Acquisition(8, 1));
  }
  EXPECT_EQ(ReadIsmrmrd(bad_xml).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::recon::formats
