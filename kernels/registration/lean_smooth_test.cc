// SmoothInPlaceWithScratch equals GaussianSmooth: on the CPU (same call) and
// on CUDA with a borrowed scratch (same kernels: tolerance 0) for random
// fields, plus its argument checks.
#include "kernels/registration/lean_smooth.h"

#include <gtest/gtest.h>

#include <algorithm>
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

// Issue 37: LeanSmoothTuning::run_kernel (register-blocked x, y and z
// passes) gives the default kernels' values bit for bit, float and bf16, at
// the lean stage's sigmas (6: radius 18, longer than some axes; 0.5: radius
// 2) and on extents that are not multiples of the 64-output tile nor of the
// x pass's 288-output segment (300: two segments). The same for
// LeanSmoothTuning::fixed_radius (kernels compiled for radii 2 and 18; sigma
// 2 falls back to the run kernels) and, bf16, fused_xy (tiles of 128 x 32:
// 300 and 130 cross them).
TEST(LeanSmoothCuda, RunKernelEqualsDefault) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  for (const Shape& shape : {Shape{37, 29, 71, 3}, Shape{70, 13, 9}, Shape{33, 130, 66, 3}, Shape{300, 9, 20, 3}}) {
    for (const double sigma : {6.0, 0.5, 2.0}) {
      SCOPED_TRACE(ShapeToString(shape) + ", sigma " + std::to_string(sigma));
      NDArray host = RandomField(shape, 3);
      const int64_t voxels = shape[0] * shape[1] * shape[2];
      NDArray scratch = NDArray::Allocate({shape[0], shape[1], shape[2]}, DType::kFloat32, MemoryKind::kDevice).value();
      for (const bool fixed : {false, true}) {
        SCOPED_TRACE(fixed ? "fixed radius" : "run kernel");
        NDArray a = host.CopyTo(MemoryKind::kDevice, stream).value();
        NDArray b = host.CopyTo(MemoryKind::kDevice, stream).value();
        LeanSmoothTuning one_per_sweep, run;  // explicit: the default is the run kernel
        one_per_sweep.run_kernel = false;
        one_per_sweep.fixed_radius = false;
        run.run_kernel = true;
        run.fixed_radius = fixed;
        ASSERT_TRUE(SmoothInPlaceWithScratch(a, {sigma, sigma, sigma}, scratch.data<float>(), voxels, stream,
                                             one_per_sweep)
                        .ok());
        ASSERT_TRUE(SmoothInPlaceWithScratch(b, {sigma, sigma, sigma}, scratch.data<float>(), voxels, stream, run).ok());
        NDArray ha = a.CopyTo(MemoryKind::kHost, stream).value(), hb = b.CopyTo(MemoryKind::kHost, stream).value();
        int64_t differ = 0;
        for (int64_t i = 0; i < ha.num_elements(); ++i) differ += ha.data<float>()[i] != hb.data<float>()[i];
        EXPECT_EQ(differ, 0) << "float";
        // Against the CPU (GaussianSmooth's reference): float sums in another order.
        NDArray want = host.Clone().value();
        ASSERT_TRUE(GaussianSmooth(want, &want, {sigma, sigma, sigma}, Stream::Cpu()).ok());
        double worst = 0;
        for (int64_t i = 0; i < hb.num_elements(); ++i) {
          worst = std::max(worst, std::abs(double(hb.data<float>()[i]) - want.data<float>()[i]));
        }
        EXPECT_LT(worst, 1e-5);
        // With fixed radii also the x and y passes in one kernel (fused_xy).
        {
          NDArray f = host.CopyTo(MemoryKind::kDevice, stream).value();
          LeanSmoothTuning xy = run;
          xy.fused_xy = true;
          ASSERT_TRUE(SmoothInPlaceWithScratch(f, {sigma, sigma, sigma}, scratch.data<float>(), voxels, stream, xy).ok());
          NDArray hf = f.CopyTo(MemoryKind::kHost, stream).value();
          int64_t differ_xy = 0;
          for (int64_t i = 0; i < ha.num_elements(); ++i) differ_xy += ha.data<float>()[i] != hf.data<float>()[i];
          EXPECT_EQ(differ_xy, 0) << "float, x and y passes fused";
        }

        // bf16 in place: the same kernels through the float scratch.
        const int comps = shape.size() == 4 ? static_cast<int>(shape[3]) : 1;
        std::vector<BFloat16> h16(host.num_elements());
        for (size_t i = 0; i < h16.size(); ++i) h16[i] = FromFloat<BFloat16>(host.data<float>()[i]);
        auto upload = [&]() {
          auto buf = Buffer::Allocate(MemoryKind::kDevice, h16.size() * sizeof(BFloat16), stream.ordinal()).value();
          EXPECT_TRUE(CopyBytes(buf->data(), MemoryKind::kDevice, h16.data(), MemoryKind::kHost,
                                h16.size() * sizeof(BFloat16), stream)
                          .ok());
          return buf;
        };
        auto c = upload(), d = upload();
        const Dims3 dims{shape[0], shape[1], shape[2]};
        ASSERT_TRUE(SmoothBf16InPlaceWithScratch(static_cast<BFloat16*>(c->data()), dims, comps, {sigma, sigma, sigma},
                                                 scratch.data<float>(), voxels, stream, one_per_sweep)
                        .ok());
        ASSERT_TRUE(SmoothBf16InPlaceWithScratch(static_cast<BFloat16*>(d->data()), dims, comps, {sigma, sigma, sigma},
                                                 scratch.data<float>(), voxels, stream, run)
                        .ok());
        // With fixed radii also the y and x passes in one kernel (fused_xy).
        LeanSmoothTuning xy = run;
        xy.fused_xy = true;
        auto e = upload();
        ASSERT_TRUE(SmoothBf16InPlaceWithScratch(static_cast<BFloat16*>(e->data()), dims, comps, {sigma, sigma, sigma},
                                                 scratch.data<float>(), voxels, stream, xy)
                        .ok());
        std::vector<BFloat16> hc(h16.size()), hd(h16.size()), he(h16.size());
        ASSERT_TRUE(CopyBytes(hc.data(), MemoryKind::kHost, c->data(), MemoryKind::kDevice, hc.size() * 2, stream).ok());
        ASSERT_TRUE(CopyBytes(hd.data(), MemoryKind::kHost, d->data(), MemoryKind::kDevice, hd.size() * 2, stream).ok());
        ASSERT_TRUE(CopyBytes(he.data(), MemoryKind::kHost, e->data(), MemoryKind::kDevice, he.size() * 2, stream).ok());
        differ = 0;
        int64_t differ_xy = 0;
        for (size_t i = 0; i < hc.size(); ++i) {
          differ += hc[i].bits != hd[i].bits;
          differ_xy += hc[i].bits != he[i].bits;
        }
        EXPECT_EQ(differ, 0) << "bf16";
        EXPECT_EQ(differ_xy, 0) << "bf16, y and x passes fused";
      }
    }
  }
}

}  // namespace
}  // namespace registration
}  // namespace tessera
