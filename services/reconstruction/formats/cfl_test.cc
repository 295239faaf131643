// BART .cfl/.hdr: round trip of a random 4-D array, BART-written headers
// (extra sections), malformed headers (no dimensions, non-numeric, zero,
// 17 dimensions, element overflow), truncated and over-long .cfl, missing
// files, trajectories, MRI shape checks; and, when `bart` is installed, files
// BART wrote read back and files we wrote processed by BART.
#include "services/reconstruction/formats/cfl.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "common/testing/temp_files.h"

namespace tessera::recon::formats {
namespace {

using Complex = std::complex<float>;
using ::tessera::testing::TestTmpPath;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

CflArray RandomArray(std::vector<int64_t> dims, uint32_t seed) {
  auto array = MakeCfl(dims);
  EXPECT_TRUE(array.ok());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (auto& v : array->data) v = Complex(dist(rng), dist(rng));
  return *array;
}

bool HaveBart() { return std::system("command -v bart > /dev/null 2>&1") == 0; }

TEST(Cfl, RoundTrip) {
  const CflArray a = RandomArray({5, 4, 1, 3}, 1);
  const std::string path = TestTmpPath("round");
  ASSERT_TRUE(WriteCfl(path, a).ok());
  auto b = ReadCfl(path + ".cfl");  // the extension is accepted
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->dims, a.dims);
  EXPECT_EQ(b->data, a.data);
  auto header = ReadCflHeader(path);  // dimensions only
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(header->dims, a.dims);
  EXPECT_TRUE(header->data.empty());
}

TEST(Cfl, ParsesBartHeadersAndRejectsMalformedOnes) {
  auto dims = ParseCflHeader("# Dimensions\n8 8 1 2 1 1 1 1 1 1 1 1 1 1 1 1 \n# Command\nphantom\n# Creator\nBART\n", "h");
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ((*dims)[0], 8);
  EXPECT_EQ((*dims)[3], 2);
  EXPECT_EQ((*dims)[15], 1);
  auto short_dims = ParseCflHeader("# Dimensions\n3 7\n", "h");
  ASSERT_TRUE(short_dims.ok());
  EXPECT_EQ((*short_dims)[1], 7);
  EXPECT_EQ((*short_dims)[2], 1);

  auto expect_invalid = [](const std::string& text, const std::string& needle) {
    auto status = ParseCflHeader(text, "bad.hdr").status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(status.message().find(needle), std::string::npos) << status;
    EXPECT_NE(status.message().find("bad.hdr"), std::string::npos) << status;
  };
  expect_invalid("8 8 1\n", "no '# Dimensions'");
  expect_invalid("# Dimensions\n8 x 1\n", "'x' is not an integer");
  expect_invalid("# Dimensions\n8 0 1\n", "dimension 1 is 0");
  expect_invalid("# Dimensions\n8 -2 1\n", "dimension 1 is -2");
  expect_invalid("# Dimensions\n1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 2\n", "more than 16");
  expect_invalid("# Dimensions\n100000 100000 100000\n", "exceed");
  expect_invalid("# Dimensions\n\n", "empty");
  EXPECT_FALSE(MakeCfl(std::vector<int64_t>(17, 1)).ok());
  EXPECT_FALSE(MakeCfl({4, 0}).ok());
}

TEST(Cfl, TruncatedLongAndMissingFiles) {
  const CflArray a = RandomArray({4, 4}, 2);
  const std::string path = TestTmpPath("trunc");
  ASSERT_TRUE(WriteCfl(path, a).ok());
  {
    std::ofstream cfl(path + ".cfl", std::ios::binary | std::ios::trunc);
    cfl.write(reinterpret_cast<const char*>(a.data.data()), 100);
  }
  auto status = ReadCfl(path).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(status.message().find("truncated"), std::string::npos) << status;
  EXPECT_EQ(ReadCflHeader(path).status(), status);  // the header check sees the size too
  {
    std::ofstream cfl(path + ".cfl", std::ios::binary | std::ios::trunc);
    cfl.write(reinterpret_cast<const char*>(a.data.data()), a.data.size() * 8);
    cfl.write("x", 1);
  }
  EXPECT_EQ(ReadCfl(path).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReadCfl(TestTmpPath("absent")).status().code(), absl::StatusCode::kNotFound);
  WriteText(TestTmpPath("nocfl.hdr"), "# Dimensions\n2 2\n");
  EXPECT_EQ(ReadCfl(TestTmpPath("nocfl")).status().code(), absl::StatusCode::kNotFound);
  CflArray wrong;
  wrong.dims[0] = 3;
  EXPECT_EQ(WriteCfl(TestTmpPath("wrong"), wrong).code(), absl::StatusCode::kInvalidArgument);
}

TEST(Cfl, TrajectoryAndNonCartesianChecks) {
  auto t = mri::RadialTrajectory(16, 32, 5, mri::RadialOrdering::kGoldenAngle);
  ASSERT_TRUE(t.ok());
  const CflArray traj = TrajectoryToCfl(*t);
  EXPECT_EQ(traj.dim(0), 3);
  EXPECT_EQ(traj.dim(1), 32);
  EXPECT_EQ(traj.dim(2), 5);
  auto back = TrajectoryFromCfl(traj);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kx, t->kx);
  EXPECT_EQ(back->ky, t->ky);
  CflArray kz = traj;
  kz.data[3 * 7 + 2] = 1.0f;
  EXPECT_NE(TrajectoryFromCfl(kz).status().message().find("kz"), std::string::npos);
  CflArray nan = traj;
  nan.data[0] = Complex(NAN, 0);
  EXPECT_FALSE(TrajectoryFromCfl(nan).ok());
  EXPECT_FALSE(TrajectoryFromCfl(*MakeCfl({2, 32, 5})).ok());

  auto k = MakeCfl({1, 32, 5, 4});
  auto maps = MakeCfl({16, 16, 1, 4});
  auto dims = CheckNonCartesianCfl(*k, traj, *maps);
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(dims->coils, 4);
  EXPECT_EQ(dims->nx, 16);
  auto k3 = MakeCfl({1, 32, 5, 3});
  auto status = CheckNonCartesianCfl(*k3, traj, *maps).status();
  EXPECT_NE(status.message().find("coils"), std::string::npos) << status;
  auto k_short = MakeCfl({1, 31, 5, 4});
  EXPECT_FALSE(CheckNonCartesianCfl(*k_short, traj, *maps).ok());
}

TEST(Cfl, NonCartesianStacks) {
  const CflArray traj = *MakeCfl({3, 32, 5});
  std::vector<int64_t> k_dims(16, 1), maps_dims(16, 1);
  k_dims[1] = 32, k_dims[2] = 5, k_dims[3] = 4, k_dims[kTimeDim] = 3, k_dims[kSliceDim] = 6;
  maps_dims[0] = 16, maps_dims[1] = 16, maps_dims[3] = 4, maps_dims[kSliceDim] = 6;
  const CflArray k = *MakeCfl(k_dims);
  auto dims = CheckNonCartesianCfl(k, traj, *MakeCfl(maps_dims));
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(dims->frames, 3);
  EXPECT_EQ(dims->slices, 6);
  EXPECT_TRUE(dims->maps_per_slice);
  maps_dims[kSliceDim] = 1;  // one set for all slices
  dims = CheckNonCartesianCfl(k, traj, *MakeCfl(maps_dims));
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_FALSE(dims->maps_per_slice);

  maps_dims[kSliceDim] = 5;
  auto status = CheckNonCartesianCfl(k, traj, *MakeCfl(maps_dims)).status();
  EXPECT_NE(status.message().find("maps: 5 slices (dimension 13) but the kspace has 6"), std::string::npos) << status;
  maps_dims[kSliceDim] = 6, maps_dims[kTimeDim] = 3;
  status = CheckNonCartesianCfl(k, traj, *MakeCfl(maps_dims)).status();
  EXPECT_NE(status.message().find("maps: dimension 10 is 3"), std::string::npos) << status;
  maps_dims[kTimeDim] = 1;
  k_dims[kAvgDim] = 2;
  status = CheckNonCartesianCfl(*MakeCfl(k_dims), traj, *MakeCfl(maps_dims)).status();
  EXPECT_NE(status.message().find("kspace: dimension 14 is 2"), std::string::npos) << status;
}

TEST(Cfl, ThreeDimensional) {
  // A 3-D trajectory (kz kept) and 3-D maps (dimension 2 = nz).
  CflArray traj = *MakeCfl({3, 8, 6});
  for (int64_t j = 0; j < 48; ++j) traj.data[3 * j + 2] = static_cast<float>(j % 4) - 2;
  auto t = Trajectory3DFromCfl(traj);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 48);
  EXPECT_EQ(t->kz[5], -1.0f);
  EXPECT_NE(TrajectoryFromCfl(traj).status().message().find("3-D coil maps"), std::string::npos);
  CflArray bad = traj;
  bad.data[3 * 5 + 2] = Complex(0, 1);
  EXPECT_EQ(Trajectory3DFromCfl(bad).status().code(), absl::StatusCode::kInvalidArgument);
  auto dims = CheckNonCartesianCfl(*MakeCfl({1, 8, 6, 4}), traj, *MakeCfl({16, 16, 12, 4}));
  ASSERT_TRUE(dims.ok()) << dims.status();
  EXPECT_EQ(dims->nz, 12);
  std::vector<int64_t> k_dims(16, 1);
  k_dims[1] = 8, k_dims[2] = 6, k_dims[3] = 4, k_dims[kSliceDim] = 2;
  auto status = CheckNonCartesianCfl(*MakeCfl(k_dims), traj, *MakeCfl({16, 16, 12, 4})).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("does not stack"), std::string::npos) << status;
}

TEST(Cfl, InteroperatesWithBart) {
  if (!HaveBart()) GTEST_SKIP() << "bart is not installed";
  // BART writes, we read: its radial trajectory is 3 x 16 x 4, real, kz = 0.
  const std::string traj_path = TestTmpPath("bart_traj");
  ASSERT_EQ(std::system(("bart traj -r -x 16 -y 4 " + traj_path + " > /dev/null").c_str()), 0);
  auto traj = ReadCfl(traj_path);
  ASSERT_TRUE(traj.ok()) << traj.status();
  EXPECT_EQ(traj->dim(0), 3);
  EXPECT_EQ(traj->dim(1), 16);
  EXPECT_EQ(traj->dim(2), 4);
  auto t = TrajectoryFromCfl(*traj);
  ASSERT_TRUE(t.ok()) << t.status();
  float kmax = 0;
  for (int64_t j = 0; j < t->size(); ++j) kmax = std::max(kmax, std::hypot(t->kx[j], t->ky[j]));
  EXPECT_NEAR(kmax, 7.5, 1e-4);
  // We write, BART reads and writes back: `bart scale 2`.
  const CflArray a = RandomArray({6, 5, 1, 2}, 3);
  const std::string in = TestTmpPath("ours"), out = TestTmpPath("bart_scaled");
  ASSERT_TRUE(WriteCfl(in, a).ok());
  ASSERT_EQ(std::system(("bart scale 2 " + in + " " + out + " > /dev/null").c_str()), 0);
  auto scaled = ReadCfl(out);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_EQ(scaled->dims, a.dims);
  for (size_t i = 0; i < a.data.size(); ++i) EXPECT_EQ(scaled->data[i], 2.0f * a.data[i]);
}

}  // namespace
}  // namespace tessera::recon::formats
