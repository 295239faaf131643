#include "kernels/registration/pipeline/ants_transform_io.h"
#include "kernels/registration/pipeline/testing/random_affine.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>

#include "common/nifti_io.h"

namespace tessera::registration {
namespace {

std::string Tmp(const std::string& name) { return std::string(std::getenv("TEST_TMPDIR")) + "/" + name; }

Mat4 RandomAffine(std::mt19937& rng) { return testing::RandomAffine(rng, 0.3, 20); }

TEST(ItkAffine, RoundTripsWithAnyCentre) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-50, 50);
  for (int trial = 0; trial < 10; ++trial) {
    Mat4 t = RandomAffine(rng);
    const std::string path = Tmp("affine.mat");
    ASSERT_TRUE(WriteItkAffine(path, t, {u(rng), u(rng), u(rng)}).ok());
    Mat4 back = ReadItkAffine(path).value();
    for (int i = 0; i < 16; ++i) EXPECT_NEAR(back[i], t[i], 1e-9) << i;
  }
}

TEST(ItkAffine, FileLayoutIsItkMatlabV4InLps) {
  // A shift of 5 mm toward patient right (RAS +x) is -5 in LPS.
  const Mat4 right = {1, 0, 0, 5, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
  const std::string path = Tmp("right.mat");
  ASSERT_TRUE(WriteItkAffine(path, right).ok());
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  int32_t header[5];
  std::memcpy(header, bytes.data(), 20);
  EXPECT_EQ(header[0], 0);   // little-endian double full matrix
  EXPECT_EQ(header[1], 12);  // 12 parameters as a column
  EXPECT_EQ(header[2], 1);
  EXPECT_EQ(std::string(bytes.data() + 20), "AffineTransform_double_3_3");
  double params[12];
  std::memcpy(params, bytes.data() + 20 + header[4], sizeof(params));
  EXPECT_EQ(params[0], 1);
  EXPECT_EQ(params[9], -5);
  EXPECT_EQ(params[10], 0);
}

TEST(ItkAffine, RejectsTruncatedAndGarbage) {
  std::mt19937 rng(3);
  const std::string path = Tmp("t.mat");
  ASSERT_TRUE(WriteItkAffine(path, RandomAffine(rng)).ok());
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  for (size_t cut : {size_t{3}, size_t{25}, bytes.size() - 1}) {
    std::ofstream(Tmp("cut.mat"), std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut));
    auto r = ReadItkAffine(Tmp("cut.mat"));
    EXPECT_FALSE(r.ok()) << cut;
  }
  std::ofstream(Tmp("garbage.mat"), std::ios::binary) << "this is not a matlab file at all, no sir";
  EXPECT_EQ(ReadItkAffine(Tmp("garbage.mat")).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadItkAffine(Tmp("missing.mat")).status().code(), absl::StatusCode::kNotFound);
}

TEST(AntsWarp, RoundTripsAndStoresLpsVectors) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> u(-3, 3);
  NDArray field = NDArray::Allocate({6, 5, 4, 3}, DType::kFloat32).value();
  for (int64_t i = 0; i < field.num_elements(); ++i) field.data<float>()[i] = u(rng);
  Geometry g;
  g.spacing = {1.5, 2, 2.5};
  g.origin = {10, -20, 30};
  const std::string path = Tmp("0Warp.nii.gz");
  ASSERT_TRUE(WriteAntsWarp(path, field, g).ok());

  NiftiInfo info;
  Volume raw = ReadNifti(path, &info).value();
  EXPECT_EQ(info.intent_code, 1007);
  ASSERT_EQ(info.dims.size(), 5u);
  EXPECT_EQ(info.dims[3], 1);
  EXPECT_EQ(info.dims[4], 3);
  const int64_t n = 6 * 5 * 4;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(raw.data.data<float>()[i], -field.data<float>()[i]);                  // x: R -> L
    EXPECT_EQ(raw.data.data<float>()[n + i], -field.data<float>()[n + i]);          // y: A -> P
    EXPECT_EQ(raw.data.data<float>()[2 * n + i], field.data<float>()[2 * n + i]);   // z unchanged
  }
  Volume back = ReadAntsWarp(path).value();
  for (int64_t i = 0; i < field.num_elements(); ++i) EXPECT_EQ(back.data.data<float>()[i], field.data<float>()[i]);
  EXPECT_EQ(back.geometry.spacing, g.spacing);
}

TEST(AntsWarp, RejectsWrongShapes) {
  NDArray scalar = NDArray::Allocate({4, 4, 4}, DType::kFloat32).value();
  EXPECT_EQ(WriteAntsWarp(Tmp("bad.nii.gz"), scalar, Geometry{}).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::registration
