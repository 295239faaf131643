// CUDA vs CPU parity of the mixed-precision lean-stage kernels (issue 13,
// storage16.h) on random non-zero inputs (skipped without a GPU). Both
// backends store the same 16-bit roundings, so differences come from float
// summation order alone, except where a value lands on a rounding boundary:
// - ConvertToHalf / ConvertToFloat / MaxAbs: exact (bit-identical).
// - GridSampleHalfImage: 1e-5 absolute (values in [0.1, 1], float math).
// - GridSampleBackwardHalfImage (bf16 out): 2^-7 of the largest |dL/du|.
// - LnccHalfFixed: loss 1e-5 relative; gradient rel. L2 2e-3 (bf16 a, b, c).
// - MseHalfFixed: loss 1e-6 relative; gradient 1e-6 of its largest value.
// - SmoothBf16InPlaceWithScratch: 2^-7 of the largest |value| (one bf16 ulp).
// - ComposeGreedyStepInPlace (bf16 grad): 1e-5 of max|u| + max|step|.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "common/ndarray.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/grid_sampler.h"
#include "kernels/registration/lean_compose.h"
#include "kernels/registration/lean_smooth.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/mixed_ops.h"

namespace tessera::registration {
namespace {

using ::tessera::testing::DeviceArray;
using ::tessera::testing::RandomUniform;

constexpr Dims3 kDims{37, 29, 23};

template <typename S>
std::vector<S> ToStorage(const std::vector<float>& v) {
  std::vector<S> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FromFloat<S>(v[i]);
  return out;
}

template <typename S>
std::vector<float> FromStorage(const std::vector<S>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToFloat(v[i]);
  return out;
}

float MaxAbsOf(const std::vector<float>& v) {
  float m = 0;
  for (float x : v) m = std::max(m, std::abs(x));
  return m;
}

void ExpectClose(const std::vector<float>& a, const std::vector<float>& b, double tol, const char* what) {
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - b[i]));
  EXPECT_LE(worst, tol) << what;
}

// The sampler arguments of a small non-trivial warp (affine + displacement).
struct SamplerCase {
  std::vector<float> image = RandomUniform<float>(kDims.size(), 0.1, 1.0, 1);
  std::vector<float> affine = {1.02f, 0.03f, -0.01f, 0.02f, -0.02f, 0.98f, 0.04f, -0.03f, 0.01f, -0.02f, 1.01f, 0.01f};
  std::vector<float> disp = RandomUniform<float>(3 * kDims.size(), -0.03, 0.03, 2);
};

TEST(MixedPrecisionCuda, ConversionsAndMaxAbsAreExact) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream gpu = Stream::Create(Backend::kCuda).value();
  const std::vector<float> x = RandomUniform<float>(100003, -3.0, 3.0, 3);
  std::vector<Half> cpu_half(x.size());
  ASSERT_TRUE(ConvertToHalf(Stream::Cpu(), x.data(), cpu_half.data(), x.size()).ok());
  auto dx = DeviceArray<float>::FromHost(x, gpu);
  auto dh = DeviceArray<Half>::Allocate(x.size(), gpu);
  ASSERT_TRUE(ConvertToHalf(gpu, dx.data(), dh.data(), x.size()).ok());
  const std::vector<Half> gpu_half = dh.Download();
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(cpu_half[i].bits, gpu_half[i].bits) << i;
  ASSERT_TRUE(ConvertToFloat(gpu, dh.data(), dx.data(), x.size()).ok());
  EXPECT_EQ(dx.Download(), FromStorage(cpu_half));
  const std::vector<BFloat16> b = ToStorage<BFloat16>(x);
  auto db = DeviceArray<BFloat16>::FromHost(b, gpu);
  EXPECT_EQ(MaxAbs(gpu, db.data(), b.size()).value(), MaxAbs(Stream::Cpu(), b.data(), b.size()).value());
}

TEST(MixedPrecisionCuda, SamplerForwardAndBackward) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream gpu = Stream::Create(Backend::kCuda).value();
  SamplerCase c;
  const std::vector<Half> image = ToStorage<Half>(c.image);
  GridSampleArgs args;
  args.image_dims = kDims;
  args.out_dims = kDims;
  args.affine = c.affine.data();
  args.disp = c.disp.data();
  std::vector<float> cpu_out(kDims.size());
  ASSERT_TRUE(GridSampleHalfImage(Stream::Cpu(), args, image.data(), cpu_out.data()).ok());
  const std::vector<float> grad_out = RandomUniform<float>(kDims.size(), -1.0, 1.0, 4);
  std::vector<BFloat16> cpu_grad(3 * kDims.size());
  ASSERT_TRUE(GridSampleBackwardHalfImage(Stream::Cpu(), args, image.data(), grad_out.data(), cpu_grad.data()).ok());

  auto d_image = DeviceArray<Half>::FromHost(image, gpu);
  auto d_affine = DeviceArray<float>::FromHost(c.affine, gpu);
  auto d_disp = DeviceArray<float>::FromHost(c.disp, gpu);
  auto d_out = DeviceArray<float>::Allocate(kDims.size(), gpu);
  auto d_grad_out = DeviceArray<float>::FromHost(grad_out, gpu);
  auto d_grad = DeviceArray<BFloat16>::Allocate(3 * kDims.size(), gpu);
  GridSampleArgs dargs = args;
  dargs.affine = d_affine.data();
  dargs.disp = d_disp.data();
  ASSERT_TRUE(GridSampleHalfImage(gpu, dargs, d_image.data(), d_out.data()).ok());
  ASSERT_TRUE(GridSampleBackwardHalfImage(gpu, dargs, d_image.data(), d_grad_out.data(), d_grad.data()).ok());
  ExpectClose(d_out.Download(), cpu_out, 1e-5, "forward");
  const std::vector<float> cpu_g = FromStorage(cpu_grad);
  ExpectClose(FromStorage(d_grad.Download()), cpu_g, MaxAbsOf(cpu_g) / 128, "backward");
}

TEST(MixedPrecisionCuda, LnccAndMse) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream gpu = Stream::Create(Backend::kCuda).value();
  const std::vector<Half> fixed = ToStorage<Half>(RandomUniform<float>(kDims.size(), 0.1, 1.0, 5));
  const std::vector<float> warped = RandomUniform<float>(kDims.size(), 0.1, 1.0, 6);
  LnccOptions lncc;
  lncc.window = 5;
  std::vector<float> cpu_grad = warped;  // in place, as the lean stage does
  float cpu_loss = 0;
  ASSERT_TRUE(LnccHalfFixed(Stream::Cpu(), fixed.data(), cpu_grad.data(), kDims, lncc, &cpu_loss, cpu_grad.data(),
                            nullptr)
                  .ok());
  auto d_fixed = DeviceArray<Half>::FromHost(fixed, gpu);
  auto d_w = DeviceArray<float>::FromHost(warped, gpu);
  auto d_coef = DeviceArray<BFloat16>::Allocate(3 * kDims.size(), gpu);
  auto d_loss = DeviceArray<float>::Allocate(1, gpu);
  ASSERT_TRUE(LnccHalfFixed(gpu, d_fixed.data(), d_w.data(), kDims, lncc, d_loss.data(), d_w.data(), d_coef.data())
                  .ok());
  EXPECT_NEAR(d_loss.Download()[0], cpu_loss, 1e-5 * std::abs(cpu_loss));
  EXPECT_LT(::tessera::testing::RelL2(d_w.Download(), cpu_grad), 2e-3);

  std::vector<float> cpu_mse = warped;
  float cpu_mse_loss = 0;
  ASSERT_TRUE(MseHalfFixed(Stream::Cpu(), fixed.data(), cpu_mse.data(), kDims, &cpu_mse_loss, true).ok());
  d_w.Upload(warped);
  ASSERT_TRUE(MseHalfFixed(gpu, d_fixed.data(), d_w.data(), kDims, d_loss.data(), true).ok());
  EXPECT_NEAR(d_loss.Download()[0], cpu_mse_loss, 1e-6 * cpu_mse_loss);
  ExpectClose(d_w.Download(), cpu_mse, 1e-6 * MaxAbsOf(cpu_mse), "mse gradient");
}

TEST(MixedPrecisionCuda, SmoothAndCompose) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream gpu = Stream::Create(Backend::kCuda).value();
  const std::vector<BFloat16> g = ToStorage<BFloat16>(RandomUniform<float>(3 * kDims.size(), -2e-6, 3e-6, 7));
  std::vector<BFloat16> cpu_g = g;
  std::vector<float> scratch(kDims.size());
  ASSERT_TRUE(SmoothBf16InPlaceWithScratch(cpu_g.data(), kDims, 3, {1.5, 1.5, 1.5}, scratch.data(), scratch.size(),
                                           Stream::Cpu())
                  .ok());
  auto d_g = DeviceArray<BFloat16>::FromHost(g, gpu);
  auto d_scratch = DeviceArray<float>::Allocate(kDims.size(), gpu);
  ASSERT_TRUE(SmoothBf16InPlaceWithScratch(d_g.data(), kDims, 3, {1.5, 1.5, 1.5}, d_scratch.data(), kDims.size(), gpu)
                  .ok());
  const std::vector<float> smoothed = FromStorage(cpu_g);
  ExpectClose(FromStorage(d_g.Download()), smoothed, MaxAbsOf(smoothed) / 128, "smooth");

  const std::vector<float> u = RandomUniform<float>(3 * kDims.size(), -0.02, 0.02, 8);
  GreedyStep step;
  step.max_abs_grad = MaxAbsOf(smoothed);
  step.scale = -0.5f / step.max_abs_grad;
  step.to_normalized = {2.f / (kDims.nx - 1), 2.f / (kDims.ny - 1), 2.f / (kDims.nz - 1)};
  std::vector<float> cpu_u = u;
  ASSERT_TRUE(ComposeGreedyStepInPlace(Stream::Cpu(), cpu_u.data(), cpu_g.data(), kDims, step).ok());
  auto d_u = DeviceArray<float>::FromHost(u, gpu);
  d_g.Upload(cpu_g);
  ASSERT_TRUE(ComposeGreedyStepInPlace(gpu, d_u.data(), d_g.data(), kDims, step).ok());
  ExpectClose(d_u.Download(), cpu_u, 1e-5 * (MaxAbsOf(u) + 0.5 * step.to_normalized[0]), "compose");
}

}  // namespace
}  // namespace tessera::registration
