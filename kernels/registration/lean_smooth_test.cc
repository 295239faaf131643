// SmoothInPlaceWithScratch equals GaussianSmooth: on the CPU (same call) and
// on CUDA with a borrowed scratch (same kernels: tolerance 0) for random
// fields, plus its argument checks.
#include "kernels/registration/lean_smooth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "common/testing/gpu_test.h"
#include "kernels/registration/gaussian_smooth.h"

namespace tessera {
namespace registration {
namespace {

NDArray RandomField(const Shape& shape, uint32_t seed) {
  NDArray a = NDArray::Allocate(shape, DType::kFloat32).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = d(rng);
  return a;
}

TEST(LeanSmoothCpu, EqualsGaussianSmooth) {
  NDArray f = RandomField({13, 11, 9, 3}, 1);
  NDArray want = f.Clone().value();
  ASSERT_TRUE(GaussianSmooth(want, &want, {1.0, 1.0, 1.0}, Stream::Cpu()).ok());
  ASSERT_TRUE(SmoothInPlaceWithScratch(f, {1.0, 1.0, 1.0}, nullptr, 0, Stream::Cpu()).ok());
  for (int64_t i = 0; i < f.num_elements(); ++i) ASSERT_EQ(f.data<float>()[i], want.data<float>()[i]);
}

TEST(LeanSmoothCuda, BorrowedScratchEqualsGaussianSmooth) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  for (const Shape& shape : {Shape{37, 29, 23, 3}, Shape{40, 30, 20}}) {
    NDArray host = RandomField(shape, 2);
    NDArray a = host.CopyTo(MemoryKind::kDevice, stream).value();
    NDArray b = host.CopyTo(MemoryKind::kDevice, stream).value();
    ASSERT_TRUE(GaussianSmooth(a, &a, {1.0, 0.5, 1.5}, stream).ok());
    NDArray scratch = NDArray::Allocate({shape[0], shape[1], shape[2]}, DType::kFloat32, MemoryKind::kDevice).value();
    EXPECT_EQ(SmoothInPlaceWithScratch(b, {1.0, 0.5, 1.5}, scratch.data<float>(), 10, stream).code(),
              absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE(SmoothInPlaceWithScratch(b, {1.0, 0.5, 1.5}, scratch.data<float>(), scratch.num_elements(), stream).ok());
    NDArray ha = a.CopyTo(MemoryKind::kHost, stream).value(), hb = b.CopyTo(MemoryKind::kHost, stream).value();
    for (int64_t i = 0; i < ha.num_elements(); ++i) ASSERT_EQ(ha.data<float>()[i], hb.data<float>()[i]) << i;
  }
}

// Issue 37: every LeanSmoothTuning gives the one-output-per-sweep kernels'
// values bit for bit (LeanSmoothTuning{false, false}: named explicitly, the
// defaults are the run and fixed-radius kernels), float and bf16, at the lean
// stage's sigmas (6: radius 18, longer than some axes; 0.5: radius 2; 2: no
// fixed-radius kernel, the run kernels) and on extents that are not multiples
// of the 64-output tile nor of the x pass's 288-output segment (300: two
// segments), nor of the float fused xy tiles at radius 2 (128 x 32: 300 and
// 130 cross them), nor of the radius-18 march's 64- (bf16 input) and
// 128-output (float input) steps (130, 300: the ring of 128 or 256 rows wraps). Both against the CPU reference too: float within 1e-5, bf16
// within one bf16 rounding of the largest value (2^-8).
TEST(LeanSmoothCuda, EveryTuningEqualsOnePerSweep) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  LeanSmoothTuning one_per_sweep;
  one_per_sweep.run_kernel = false;
  one_per_sweep.fixed_radius = false;
  struct Named {
    const char* name;
    LeanSmoothTuning tuning;
  };
  std::vector<Named> tunings;
  LeanSmoothTuning t = one_per_sweep;
  t.run_kernel = true;
  tunings.push_back({"run kernels", t});
  t.fixed_radius = true;
  tunings.push_back({"fixed radius (radius 18: march; radius 2: float x and y fused)", t});
  tunings.push_back({"shipped defaults", LeanSmoothTuning{}});
  for (const Shape& shape :
       {Shape{37, 29, 71, 3}, Shape{70, 13, 9}, Shape{33, 130, 66, 3}, Shape{300, 9, 20, 3}, Shape{19, 21, 300}}) {
    for (const double sigma : {6.0, 0.5, 2.0}) {
      SCOPED_TRACE(ShapeToString(shape) + ", sigma " + std::to_string(sigma));
      NDArray host = RandomField(shape, 3);
      const int64_t voxels = shape[0] * shape[1] * shape[2];
      const int comps = shape.size() == 4 ? static_cast<int>(shape[3]) : 1;
      const Dims3 dims{shape[0], shape[1], shape[2]};
      const std::array<double, 3> sigmas = {sigma, sigma, sigma};
      NDArray scratch = NDArray::Allocate({shape[0], shape[1], shape[2]}, DType::kFloat32, MemoryKind::kDevice).value();
      std::vector<BFloat16> h16(host.num_elements());
      for (size_t i = 0; i < h16.size(); ++i) h16[i] = FromFloat<BFloat16>(host.data<float>()[i]);
      auto smooth_float = [&](const LeanSmoothTuning& tuning) {
        NDArray a = host.CopyTo(MemoryKind::kDevice, stream).value();
        EXPECT_TRUE(SmoothInPlaceWithScratch(a, sigmas, scratch.data<float>(), voxels, stream, tuning).ok());
        return a.CopyTo(MemoryKind::kHost, stream).value();
      };
      auto smooth_bf16 = [&](const LeanSmoothTuning& tuning) {
        auto buf = Buffer::Allocate(MemoryKind::kDevice, h16.size() * sizeof(BFloat16), stream.ordinal()).value();
        EXPECT_TRUE(CopyBytes(buf->data(), MemoryKind::kDevice, h16.data(), MemoryKind::kHost,
                              h16.size() * sizeof(BFloat16), stream)
                        .ok());
        EXPECT_TRUE(SmoothBf16InPlaceWithScratch(static_cast<BFloat16*>(buf->data()), dims, comps, sigmas,
                                                 scratch.data<float>(), voxels, stream, tuning)
                        .ok());
        std::vector<BFloat16> out(h16.size());
        EXPECT_TRUE(
            CopyBytes(out.data(), MemoryKind::kHost, buf->data(), MemoryKind::kDevice, out.size() * 2, stream).ok());
        return out;
      };
      const NDArray base = smooth_float(one_per_sweep);
      const std::vector<BFloat16> base16 = smooth_bf16(one_per_sweep);
      // The CPU references: GaussianSmooth (float sums in another order) and
      // the bf16 path's CPU backend (x, y, z in float, rounded once).
      NDArray want = host.Clone().value();
      ASSERT_TRUE(GaussianSmooth(want, &want, sigmas, Stream::Cpu()).ok());
      double worst = 0;
      for (int64_t i = 0; i < base.num_elements(); ++i) {
        worst = std::max(worst, std::abs(double(base.data<float>()[i]) - want.data<float>()[i]));
      }
      EXPECT_LT(worst, 1e-5) << "float vs CPU";
      std::vector<BFloat16> want16 = h16;
      std::vector<float> cpu_scratch(voxels);
      ASSERT_TRUE(SmoothBf16InPlaceWithScratch(want16.data(), dims, comps, sigmas, cpu_scratch.data(), voxels,
                                               Stream::Cpu())
                      .ok());
      double largest = 0, worst16 = 0;
      for (size_t i = 0; i < want16.size(); ++i) {
        largest = std::max(largest, std::abs(double(ToFloat(want16[i]))));
        worst16 = std::max(worst16, std::abs(double(ToFloat(base16[i])) - ToFloat(want16[i])));
      }
      EXPECT_GT(largest, 0.0);
      EXPECT_LE(worst16, largest / 256) << "bf16 vs CPU";
      for (const Named& named : tunings) {
        SCOPED_TRACE(named.name);
        const NDArray f = smooth_float(named.tuning);
        int64_t differ = 0;
        for (int64_t i = 0; i < f.num_elements(); ++i) differ += f.data<float>()[i] != base.data<float>()[i];
        EXPECT_EQ(differ, 0) << "float";
        const std::vector<BFloat16> b = smooth_bf16(named.tuning);
        int64_t differ16 = 0;
        for (size_t i = 0; i < b.size(); ++i) differ16 += b[i].bits != base16[i].bits;
        EXPECT_EQ(differ16, 0) << "bf16";
      }
    }
  }
}

}  // namespace
}  // namespace registration
}  // namespace tessera
