#include "services/reconstruction/formats/recon_nifti.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/nifti_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::recon::formats {
namespace {

using ::testing::HasSubstr;

std::string TmpPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir ? dir : "/tmp", "/", name);
}

NDArray RandomArray(const Shape& shape, uint64_t seed, float lo = 0.5f, float hi = 2.0f) {
  NDArray a = *NDArray::Allocate(shape, DType::kFloat32);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = u(rng);
  return a;
}

void ExpectSameValues(const NDArray& a, const NDArray& b) {
  ASSERT_EQ(a.num_elements(), b.num_elements());
  ASSERT_EQ(b.dtype(), DType::kFloat32);
  for (int64_t i = 0; i < a.num_elements(); ++i) ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << i;
}

ProjectionGeometry Parallel(int64_t cols, int64_t views) {
  return ParallelBeam2D(EvenAngles(views, 3.14159265358979), 1.25, cols);
}

TEST(SinogramNiftiTest, TwoDRoundTripStoredAsColsByProjections) {
  const ProjectionGeometry p = Parallel(5, 7);
  const NDArray sino = RandomArray(SinogramShape(p), 1);
  const std::string path = TmpPath("sino2d.nii");
  ASSERT_TRUE(WriteSinogram(sino, p, path).ok());
  NiftiInfo info;
  absl::StatusOr<Volume> raw = ReadNifti(path, &info);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(info.dims, (std::vector<int64_t>{5, 7, 1}));  // nx = cols, ny = projections
  EXPECT_EQ(info.qform_code, 0);
  EXPECT_DOUBLE_EQ(raw->geometry.spacing[0], 1.25);
  absl::StatusOr<NDArray> back = ReadSinogram(path, p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape(), (Shape{5, 1, 7}));
  ExpectSameValues(sino, *back);

  // The (cols, 1, projections) spelling reads the same.
  Volume other;
  other.data = *sino.Reshaped({5, 1, 7});
  const std::string path3 = TmpPath("sino2d_3axes.nii.gz");
  ASSERT_TRUE(WriteNifti(other, path3).ok());
  back = ReadSinogram(path3, p);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameValues(sino, *back);
}

TEST(SinogramNiftiTest, ConeAndTofRoundTripGzip) {
  const ProjectionGeometry cone = ConeBeam(EvenAngles(4, 6.28), 1.0, 1.5, 3, 6, 100, 50);
  const NDArray sino = RandomArray(SinogramShape(cone), 2);
  const std::string path = TmpPath("cone.nii.gz");
  ASSERT_TRUE(WriteSinogram(sino, cone, path).ok());
  NiftiInfo info;
  ASSERT_TRUE(ReadNifti(path, &info).ok());
  EXPECT_EQ(info.dims, (std::vector<int64_t>{6, 3, 4}));
  absl::StatusOr<NDArray> back = ReadSinogram(path, cone);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameValues(sino, *back);

  const SinogramOptions tof{/*tof_bins=*/5, /*counts=*/true};
  const NDArray counts = RandomArray(SinogramShape(cone, 5), 3, 0.0f, 30.0f);
  const std::string tof_path = TmpPath("tof.nii.gz");
  ASSERT_TRUE(WriteSinogram(counts, cone, tof_path, 5).ok());
  ASSERT_TRUE(ReadNifti(tof_path, &info).ok());
  EXPECT_EQ(info.dims, (std::vector<int64_t>{6, 3, 5, 4}));
  back = ReadSinogram(tof_path, cone, tof);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape(), (Shape{6, 3, 5, 4}));
  ExpectSameValues(counts, *back);
  // The same file without the TOF axis expected is a size mismatch.
  absl::Status s = ReadSinogram(tof_path, cone).status();
  EXPECT_EQ(std::string(s.message()),
            tof_path + ": sinogram is 6x3x5x4 but proj_geom has 6 columns x 3 rows x 4 projections");
}

TEST(SinogramNiftiTest, MismatchNamesExpectedAndGot) {
  const ProjectionGeometry p = Parallel(6, 4);
  const std::string path = TmpPath("wrong.nii");
  ASSERT_TRUE(WriteSinogram(RandomArray({6, 1, 8}, 4), Parallel(6, 8), path).ok());
  absl::Status s = ReadSinogram(path, p).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()), path + ": sinogram is 6x8 but proj_geom has 6 columns x 4 projections");
  // Transposed (projections fastest) is refused too, not silently misread.
  Volume transposed;
  transposed.data = RandomArray({4, 6}, 5);
  ASSERT_TRUE(WriteNifti(transposed, path).ok());
  s = ReadSinogram(path, p).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("sinogram is 4x6 but proj_geom has 6 columns x 4 projections"));
}

TEST(SinogramNiftiTest, NonFiniteAndNegativeCountsNameTheFirstBadIndex) {
  const ProjectionGeometry p = Parallel(5, 4);
  NDArray sino = RandomArray(SinogramShape(p), 6);
  sino.data<float>()[3 + 5 * 2] = std::numeric_limits<float>::quiet_NaN();
  sino.data<float>()[4 + 5 * 3] = std::numeric_limits<float>::infinity();
  const std::string path = TmpPath("nan.nii.gz");
  ASSERT_TRUE(WriteSinogram(sino, p, path).ok());
  absl::Status s = ReadSinogram(path, p).status();
  EXPECT_EQ(std::string(s.message()), path + ": sinogram value at (col 3, projection 2) is NaN");

  NDArray counts = RandomArray(SinogramShape(p), 7);
  counts.data<float>()[1 + 5 * 1] = -2.0f;
  ASSERT_TRUE(CheckSinogram(counts, p).ok());  // CT data may be negative (log of noisy flux)
  SinogramOptions pet;
  pet.counts = true;
  pet.what = "prompts";
  s = CheckSinogram(counts, p, pet).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(s.message()), "prompts value at (col 1, projection 1) is negative (-2); counts must be >= 0");

  const ProjectionGeometry cone = ConeBeam({0, 1}, 1, 1, 2, 3, 100, 50);
  NDArray tof = RandomArray(SinogramShape(cone, 2), 8);
  tof.data<float>()[2 + 3 * (1 + 2 * (1 + 2 * 1))] = -std::numeric_limits<float>::infinity();
  s = CheckSinogram(tof, cone, {2, false}).status();
  EXPECT_EQ(std::string(s.message()), "sinogram value at (col 2, row 1, TOF bin 1, projection 1) is -Inf");
}

TEST(SinogramNiftiTest, OtherDtypesAreConverted) {
  const ProjectionGeometry p = Parallel(3, 2);
  Volume v;
  v.data = *NDArray::Allocate({3, 2}, DType::kInt16);
  for (int i = 0; i < 6; ++i) v.data.data<int16_t>()[i] = static_cast<int16_t>(10 * i - 7);
  const std::string path = TmpPath("int16.nii");
  ASSERT_TRUE(WriteNifti(v, path).ok());
  absl::StatusOr<NDArray> back = ReadSinogram(path, p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->dtype(), DType::kFloat32);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(back->data<float>()[i], 10.0f * i - 7);
}

VolumeGeometry OffsetVolume() {
  VolumeGeometry g;
  g.nx = 6;
  g.ny = 5;
  g.nz = 4;
  g.min_x = -10;
  g.max_x = 2;  // dx = 2
  g.min_y = 3;
  g.max_y = 8;  // dy = 1
  g.min_z = -1;
  g.max_z = 1;  // dz = 0.5
  return g;
}

TEST(VolumeNiftiTest, AffineMapsVoxelsToGeometryCentres) {
  const VolumeGeometry g = OffsetVolume();
  const NDArray data = RandomArray({g.nx, g.ny, g.nz}, 9);
  const std::string path = TmpPath("vol.nii.gz");
  ASSERT_TRUE(WriteVolume(data, g, path).ok());
  NiftiInfo info;
  absl::StatusOr<Volume> raw = ReadNifti(path, &info);
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_GT(info.qform_code, 0);
  EXPECT_GT(info.sform_code, 0);
  const Mat4 m = raw->geometry.IndexToWorld();
  for (int64_t k : {0, 3}) {
    for (int64_t j : {0, 4}) {
      for (int64_t i : {0, 5}) {
        const Vec3 c = g.VoxelCenter(i, j, k);
        EXPECT_NEAR(m[0] * i + m[1] * j + m[2] * k + m[3], c.x, 1e-5);
        EXPECT_NEAR(m[4] * i + m[5] * j + m[6] * k + m[7], c.y, 1e-5);
        EXPECT_NEAR(m[8] * i + m[9] * j + m[10] * k + m[11], c.z, 1e-5);
      }
    }
  }
  absl::StatusOr<NDArray> back = ReadVolume(path, g);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->shape(), (Shape{6, 5, 4}));
  ExpectSameValues(data, *back);
}

TEST(VolumeNiftiTest, MismatchesAreNamed) {
  const VolumeGeometry g = OffsetVolume();
  const std::string path = TmpPath("mu.nii");
  ASSERT_TRUE(WriteVolume(RandomArray({6, 5, 4}, 10), g, path).ok());
  VolumeReadOptions mu;
  mu.what = "attenuation map";
  mu.nonnegative = true;

  VolumeGeometry bigger = g;
  bigger.nz = 5;
  bigger.max_z = 1.5;
  EXPECT_EQ(std::string(ReadVolume(path, bigger, mu).status().message()),
            path + ": attenuation map is 6x5x4 but vol_geom has 6x5x5 voxels");

  VolumeGeometry finer = g;
  finer.min_x = -4;  // dx = 1
  EXPECT_EQ(std::string(ReadVolume(path, finer, mu).status().message()),
            path + ": attenuation map voxel size is 2x1x0.5 mm but vol_geom has 1x1x0.5 mm");

  VolumeGeometry shifted = g;
  shifted.min_y += 0.5;
  shifted.max_y += 0.5;
  EXPECT_EQ(std::string(ReadVolume(path, shifted, mu).status().message()),
            path + ": attenuation map voxel (0, 0, 0) is centred at (-9, 3.5, -0.75) mm but vol_geom puts it at "
                   "(-9, 4, -0.75) mm");
  VolumeReadOptions lenient = mu;
  lenient.check_affine = false;
  EXPECT_TRUE(ReadVolume(path, shifted, lenient).ok());

  Volume flipped = *ReadNifti(path);
  flipped.geometry.direction = {-1, 0, 0, 0, 1, 0, 0, 0, 1};
  EXPECT_THAT(std::string(CheckVolume(flipped, g, mu).status().message()),
              HasSubstr("attenuation map axes point LAS (NIfTI affine) but vol_geom's index axes are RAS"));

  Volume negative = *ReadNifti(path);
  negative.data.data<float>()[1 + 6 * (2 + 5 * 3)] = -0.5f;
  EXPECT_EQ(std::string(CheckVolume(negative, g, mu).status().message()),
            "attenuation map value at voxel (1, 2, 3) is negative (-0.5); it must be >= 0");
  EXPECT_TRUE(CheckVolume(negative, g).ok());  // an image may be negative
  negative.data.data<float>()[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(std::string(CheckVolume(negative, g).status().message()), "volume value at voxel (0, 0, 0) is NaN");
}

TEST(VolumeNiftiTest, TwoDSliceRoundTrip) {
  const VolumeGeometry g = CenteredVolume(8, 6);
  const NDArray data = RandomArray({8, 6, 1}, 11);
  const std::string path = TmpPath("slice.nii.gz");
  ASSERT_TRUE(WriteVolume(data, g, path).ok());
  absl::StatusOr<NDArray> back = ReadVolume(path, g);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSameValues(data, *back);
  Volume v = *ReadNifti(path);
  EXPECT_DOUBLE_EQ(v.geometry.origin[0], -3.5);
  EXPECT_DOUBLE_EQ(v.geometry.origin[1], -2.5);
  EXPECT_DOUBLE_EQ(v.geometry.origin[2], 0.0);
}

TEST(WriteErrorsTest, WrongSizesAreRefused) {
  const ProjectionGeometry p = Parallel(5, 7);
  EXPECT_EQ(WriteSinogram(RandomArray({5, 6}, 1), p, TmpPath("x.nii")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteVolume(RandomArray({5, 6}, 1), CenteredVolume(5, 5), TmpPath("x.nii")).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera::recon::formats
