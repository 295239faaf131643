// CUDA SENSE against the CPU reference on random (non-zero) maps and aliased
// data, R = 1..8, both axes, 12 coils: normal equations and right-hand sides
// within 1e-5 (relative l2), unfolded images within 1e-4, same failure count;
// and a noiseless fold recovered to 1e-4 on the GPU.
#include <gtest/gtest.h>

#include <complex>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/mri/coil_maps.h"
#include "kernels/reconstruction/mri/sense_unfold.h"

namespace tessera {
namespace recon {
namespace mri {
namespace {

using Complex = std::complex<float>;
using ::tessera::testing::DeviceArray;

std::vector<Complex> RandomComplex(size_t n, uint32_t seed) {
  const auto re = ::tessera::testing::RandomUniform<float>(n, -1, 1, seed);
  const auto im = ::tessera::testing::RandomUniform<float>(n, -1, 1, seed + 1);
  std::vector<Complex> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = Complex(re[i], im[i]);
  return v;
}

using ::tessera::testing::RelL2;

// Lower triangles only (the upper one is never written).
std::vector<Complex> Lower(const std::vector<Complex>& normal, int r) {
  std::vector<Complex> out;
  for (size_t p = 0; p < normal.size() / (r * r); ++p) {
    for (int col = 0; col < r; ++col) {
      for (int row = col; row < r; ++row) out.push_back(normal[p * r * r + row + r * col]);
    }
  }
  return out;
}

TEST(SenseUnfoldCuda, MatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  for (int axis = 0; axis < 2; ++axis) {
    for (int r = 1; r <= kMaxSenseReduction; ++r) {
      SenseShape shape{axis == 0 ? 24 * r : 40, axis == 1 ? 24 * r : 36, 12, r, axis};
      const int64_t npix = shape.nx * shape.ny, batch = shape.aliased_pixels();
      const auto maps = RandomComplex(npix * shape.coils, 11 + r);
      const auto aliased = RandomComplex(batch * shape.coils, 23 + r);
      std::vector<Complex> normal(batch * r * r), rhs(batch * r);
      cpu::FormSenseNormalEquations(shape, maps.data(), aliased.data(), normal.data(), rhs.data());

      auto d_maps = DeviceArray<Complex>::FromHost(maps, *stream);
      auto d_aliased = DeviceArray<Complex>::FromHost(aliased, *stream);
      auto d_normal = DeviceArray<Complex>::Allocate(normal.size(), *stream);
      auto d_rhs = DeviceArray<Complex>::Allocate(rhs.size(), *stream);
      d_normal.Poison(Complex(0, 0));
      d_rhs.Poison(Complex(NAN, NAN));
      ASSERT_TRUE(cuda::FormSenseNormalEquations(*stream, shape, d_maps.data(), d_aliased.data(), d_normal.data(),
                                                 d_rhs.data())
                      .ok());
      EXPECT_LT(RelL2(Lower(d_normal.Download(), r), Lower(normal, r)), 1e-5) << "R " << r << " axis " << axis;
      EXPECT_LT(RelL2(d_rhs.Download(), rhs), 1e-5) << "R " << r << " axis " << axis;

      std::vector<Complex> image(npix);
      auto cpu_failed = SenseUnfold(Stream::Cpu(), shape, 0.01f, maps.data(), aliased.data(), image.data());
      auto d_image = DeviceArray<Complex>::Allocate(npix, *stream);
      d_image.Poison(Complex(NAN, NAN));
      auto gpu_failed = SenseUnfold(*stream, shape, 0.01f, d_maps.data(), d_aliased.data(), d_image.data());
      ASSERT_TRUE(cpu_failed.ok() && gpu_failed.ok()) << gpu_failed.status();
      EXPECT_EQ(*cpu_failed, *gpu_failed);
      EXPECT_LT(RelL2(d_image.Download(), image), 1e-4) << "R " << r << " axis " << axis;
    }
  }
}

TEST(SenseUnfoldCuda, NoiselessFoldIsRecovered) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  SenseShape shape{64, 64, 16, 4, 1};
  auto maps = BirdcageMaps(64, 64, {16, 1.5});
  ASSERT_TRUE(maps.ok());
  const auto truth = RandomComplex(64 * 64, 5);
  std::vector<Complex> aliased(shape.aliased_pixels() * 16);
  cpu::SenseFold(shape, maps->data(), truth.data(), aliased.data());
  auto d_maps = DeviceArray<Complex>::FromHost(*maps, *stream);
  auto d_aliased = DeviceArray<Complex>::FromHost(aliased, *stream);
  auto d_image = DeviceArray<Complex>::Allocate(truth.size(), *stream);
  auto failed = SenseUnfold(*stream, shape, 0.0f, d_maps.data(), d_aliased.data(), d_image.data());
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(*failed, 0);
  EXPECT_LT(RelL2(d_image.Download(), truth), 1e-4);
}

}  // namespace
}  // namespace mri
}  // namespace recon
}  // namespace tessera
