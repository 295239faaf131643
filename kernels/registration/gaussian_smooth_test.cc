#include "kernels/registration/gaussian_smooth.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/testing/gpu_test.h"
#include "kernels/registration/reg_testing.h"

namespace tessera {
namespace registration {
namespace {

using reg_testing::Compare;
using reg_testing::HostFloat;
using reg_testing::PoisonedDevice;
using reg_testing::RandomUniform;
using reg_testing::ToDevice;
using reg_testing::ToHost;

float& At(NDArray& a, int64_t i, int64_t j, int64_t k, int64_t c = 0) {
  return a.data<float>()[i + a.dim(0) * (j + a.dim(1) * (k + a.dim(2) * c))];
}

// Direct (non-separable) 3-D convolution with clamped borders.
NDArray DirectSmooth(const NDArray& in, const std::array<double, 3>& sigma) {
  NDArray out = HostFloat(in.shape());
  std::vector<float> t[3] = {GaussianTaps(sigma[0]), GaussianTaps(sigma[1]), GaussianTaps(sigma[2])};
  const int r[3] = {int(t[0].size() / 2), int(t[1].size() / 2), int(t[2].size() / 2)};
  const int64_t n[3] = {in.dim(0), in.dim(1), in.dim(2)};
  const int64_t comps = in.rank() == 4 ? in.dim(3) : 1;
  auto clamp = [](int64_t v, int64_t hi) { return std::min(std::max<int64_t>(v, 0), hi - 1); };
  NDArray& src = const_cast<NDArray&>(in);
  for (int64_t c = 0; c < comps; ++c)
    for (int64_t k = 0; k < n[2]; ++k)
      for (int64_t j = 0; j < n[1]; ++j)
        for (int64_t i = 0; i < n[0]; ++i) {
          double s = 0;
          for (int dz = -r[2]; dz <= r[2]; ++dz)
            for (int dy = -r[1]; dy <= r[1]; ++dy)
              for (int dx = -r[0]; dx <= r[0]; ++dx)
                s += double(t[0][dx + r[0]]) * t[1][dy + r[1]] * t[2][dz + r[2]] *
                     At(src, clamp(i + dx, n[0]), clamp(j + dy, n[1]), clamp(k + dz, n[2]), c);
          At(out, i, j, k, c) = float(s);
        }
  return out;
}

TEST(GaussianTaps, NormalisedSymmetricTruncatedAtThreeSigma) {
  EXPECT_EQ(GaussianTaps(0.0).size(), 1u);
  for (double sigma : {0.4, 1.0, 2.5, 7.3}) {
    const auto t = GaussianTaps(sigma);
    const int r = int(std::ceil(3 * sigma));
    ASSERT_EQ(int(t.size()), 2 * r + 1);
    double sum = 0;
    for (float w : t) sum += w;
    EXPECT_NEAR(sum, 1.0, 1e-6);
    for (int d = 0; d < r; ++d) EXPECT_EQ(t[d], t[2 * r - d]);
    EXPECT_NEAR(t[r + 1] / t[r], std::exp(-0.5 / (sigma * sigma)), 1e-5);
  }
}

TEST(GaussianSmoothCpu, MatchesDirectConvolution) {
  std::mt19937 rng(1);
  NDArray in = RandomUniform({13, 11, 9}, rng, -2.f, 3.f);
  const std::array<double, 3> sigma = {1.0, 0.7, 1.5};
  NDArray out = HostFloat(in.shape(), std::nanf(""));
  ASSERT_TRUE(GaussianSmooth(in, &out, sigma, Stream::Cpu()).ok());
  const auto d = Compare(out, DirectSmooth(in, sigma));
  EXPECT_EQ(d.nonfinite, 0);
  EXPECT_LE(d.max_abs, 1e-5);
}

TEST(GaussianSmoothCpu, VectorFieldIsPerComponentAndInPlaceWorks) {
  std::mt19937 rng(2);
  NDArray field = RandomUniform({10, 9, 8, 3}, rng, -1.f, 1.f);
  const std::array<double, 3> sigma = {0.8, 1.2, 0.0};
  NDArray ref = DirectSmooth(field, sigma);
  NDArray inplace = field.Clone().value();
  ASSERT_TRUE(GaussianSmooth(inplace, &inplace, sigma, Stream::Cpu()).ok());
  EXPECT_LE(Compare(inplace, ref).max_abs, 1e-5);
  // Component 1 alone, as a scalar volume.
  NDArray comp = HostFloat({10, 9, 8});
  std::copy(field.data<float>() + 720, field.data<float>() + 1440, comp.data<float>());
  NDArray comp_out = HostFloat({10, 9, 8});
  ASSERT_TRUE(GaussianSmooth(comp, &comp_out, sigma, Stream::Cpu()).ok());
  for (int64_t v = 0; v < 720; ++v) EXPECT_EQ(comp_out.data<float>()[v], inplace.data<float>()[720 + v]);
}

TEST(GaussianSmoothCpu, PreservesConstantsAndInteriorLinearRamps) {
  NDArray c = HostFloat({9, 8, 7}, 4.25f);
  ASSERT_TRUE(GaussianSmooth(c, &c, {2.0, 2.0, 2.0}, Stream::Cpu()).ok());
  for (int64_t v = 0; v < c.num_elements(); ++v) EXPECT_NEAR(c.data<float>()[v], 4.25f, 1e-5);
  NDArray ramp = HostFloat({30, 6, 5});
  for (int64_t k = 0; k < 5; ++k)
    for (int64_t j = 0; j < 6; ++j)
      for (int64_t i = 0; i < 30; ++i) At(ramp, i, j, k) = 0.5f * i + 0.25f * j;
  NDArray out = HostFloat(ramp.shape());
  ASSERT_TRUE(GaussianSmooth(ramp, &out, {2.0, 0.0, 1.0}, Stream::Cpu()).ok());
  for (int64_t i = 6; i < 24; ++i) EXPECT_NEAR(At(out, i, 3, 2), At(ramp, i, 3, 2), 1e-4) << i;  // r = 6
  EXPECT_GT(At(out, 0, 3, 2), At(ramp, 0, 3, 2));  // clamp border pulls the edge toward the interior
}

TEST(GaussianSmooth, RejectsBadArguments) {
  NDArray a = HostFloat({4, 4, 4}), b = HostFloat({4, 4, 5}), flat = HostFloat({64});
  EXPECT_EQ(GaussianSmooth(a, &b, {1, 1, 1}, Stream::Cpu()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GaussianSmooth(flat, &flat, {1, 1, 1}, Stream::Cpu()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(GaussianSmooth(a, &a, {30, 1, 1}, Stream::Cpu()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(DownsampleCpu, ShapeConstantAndRamp) {
  EXPECT_EQ(DownsampledShape({181, 217, 181}, 2.0), (Shape{91, 109, 91}));  // round(90.5) = 91
  EXPECT_EQ(DownsampledShape({5, 1, 8, 3}, 4.0), (Shape{1, 1, 2, 3}));
  NDArray c = HostFloat({20, 18, 16}, -1.5f);
  NDArray small = HostFloat(DownsampledShape(c.shape(), 2.0), std::nanf(""));
  ASSERT_TRUE(DownsampleVolume(c, &small, Stream::Cpu()).ok());
  for (int64_t v = 0; v < small.num_elements(); ++v) EXPECT_NEAR(small.data<float>()[v], -1.5f, 1e-5);
  // A ramp along x: interior samples sit at the aligned-corner coordinates.
  NDArray ramp = HostFloat({41, 4, 4});
  for (int64_t v = 0; v < ramp.num_elements(); ++v) ramp.data<float>()[v] = float(v % 41);
  NDArray out = HostFloat({21, 4, 4}, std::nanf(""));
  ASSERT_TRUE(DownsampleVolume(ramp, &out, Stream::Cpu()).ok());
  for (int64_t i = 3; i < 18; ++i) EXPECT_NEAR(At(out, i, 1, 1), i * 40.0 / 20.0, 1e-3) << i;
}

TEST(UpsampleDisplacementCpu, LinearFieldsScaleByUnits) {
  const Shape coarse = {9, 7, 5, 3}, fine = {17, 13, 9, 3};
  NDArray u = HostFloat(coarse);
  for (int64_t k = 0; k < 5; ++k)
    for (int64_t j = 0; j < 7; ++j)
      for (int64_t i = 0; i < 9; ++i) {
        At(u, i, j, k, 0) = 0.1f * i - 0.05f * k;
        At(u, i, j, k, 1) = 0.2f * j;
        At(u, i, j, k, 2) = -0.3f * k + 0.02f * i;
      }
  NDArray vox = HostFloat(fine, std::nanf("")), norm = HostFloat(fine, std::nanf(""));
  ASSERT_TRUE(UpsampleDisplacement(u, &vox, DisplacementUnits::kVoxels, Stream::Cpu()).ok());
  ASSERT_TRUE(UpsampleDisplacement(u, &norm, DisplacementUnits::kNormalized, Stream::Cpu()).ok());
  for (int64_t k = 0; k < 9; ++k)
    for (int64_t j = 0; j < 13; ++j)
      for (int64_t i = 0; i < 17; ++i) {
        const double x = i * 8.0 / 16, y = j * 6.0 / 12, z = k * 4.0 / 8;  // coarse coordinates
        const double ux = 0.1 * x - 0.05 * z, uy = 0.2 * y, uz = -0.3 * z + 0.02 * x;
        EXPECT_NEAR(At(norm, i, j, k, 0), ux, 1e-5);
        EXPECT_NEAR(At(norm, i, j, k, 1), uy, 1e-5);
        EXPECT_NEAR(At(norm, i, j, k, 2), uz, 1e-5);
        EXPECT_NEAR(At(vox, i, j, k, 0), ux * 2, 1e-5);  // (17-1)/(9-1)
        EXPECT_NEAR(At(vox, i, j, k, 1), uy * 2, 1e-5);  // (13-1)/(7-1)
        EXPECT_NEAR(At(vox, i, j, k, 2), uz * 2, 1e-5);  // (9-1)/(5-1)
      }
}

// ---------------------------------------------------------------------------
// CUDA parity: max-abs difference <= 1e-5 * max |input| (gaussian_smooth.h).
// ---------------------------------------------------------------------------
TEST(GaussianSmoothParity, CudaMatchesCpuOnRandomInputs) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(7);
  struct Case {
    Shape shape;
    std::array<double, 3> sigma;
    bool in_place;
  };
  const Case cases[] = {
      {{1, 1, 1}, {1, 1, 1}, false},          {{7, 5, 3}, {1.0, 2.0, 0.5}, false},
      {{64, 48, 40}, {1.5, 1.5, 1.5}, false}, {{64, 48, 40}, {0.0, 3.0, 0.0}, true},
      {{96, 80, 70, 3}, {2.0, 1.0, 4.0}, true}, {{181, 217, 181}, {1.0, 1.0, 1.0}, false},
      {{33, 65, 129}, {10.0, 0.0, 21.0}, false}, {{2000, 5, 4}, {3.0, 0.0, 1.0}, true},  // block per row
      {{9000, 3, 2}, {5.0, 1.0, 0.0}, true},                                             // long rows: fallback
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(ShapeToString(c.shape));
    NDArray in = RandomUniform(c.shape, rng, -3.f, 5.f);
    NDArray ref = HostFloat(c.shape);
    ASSERT_TRUE(GaussianSmooth(in, &ref, c.sigma, Stream::Cpu()).ok());
    NDArray din = ToDevice(in, stream);
    NDArray dout = c.in_place ? din : PoisonedDevice(c.shape, stream);
    ASSERT_TRUE(GaussianSmooth(din, &dout, c.sigma, stream).ok());
    const auto d = Compare(ToHost(dout, stream), ref);
    EXPECT_EQ(d.nonfinite, 0);
    EXPECT_LE(d.max_abs, 1e-5 * 5.0);
  }
}

TEST(GaussianSmoothParity, ResamplingMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(8);
  NDArray img = RandomUniform({181, 217, 181}, rng, 0.f, 100.f);
  NDArray ref = HostFloat(DownsampledShape(img.shape(), 2.0));
  ASSERT_TRUE(DownsampleVolume(img, &ref, Stream::Cpu()).ok());
  NDArray dsmall = PoisonedDevice(ref.shape(), stream);
  ASSERT_TRUE(DownsampleVolume(ToDevice(img, stream), &dsmall, stream).ok());
  auto d = Compare(ToHost(dsmall, stream), ref);
  EXPECT_EQ(d.nonfinite, 0);
  EXPECT_LE(d.max_abs, 1e-5 * 100);

  NDArray u = RandomUniform({46, 55, 46, 3}, rng, -2.f, 2.f);
  NDArray uref = HostFloat({91, 109, 91, 3});
  ASSERT_TRUE(UpsampleDisplacement(u, &uref, DisplacementUnits::kVoxels, Stream::Cpu()).ok());
  NDArray dup = PoisonedDevice(uref.shape(), stream);
  ASSERT_TRUE(UpsampleDisplacement(ToDevice(u, stream), &dup, DisplacementUnits::kVoxels, stream).ok());
  d = Compare(ToHost(dup, stream), uref);
  EXPECT_EQ(d.nonfinite, 0);
  EXPECT_LE(d.max_abs, 1e-5 * 4);
}

}  // namespace
}  // namespace registration
}  // namespace tessera
