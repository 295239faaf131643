// CUDA-vs-CPU parity of fused LNCC on random inputs (skipped without a GPU).
// Outputs are poisoned with NaN before every GPU run.
// Tolerances: loss relative 1e-5; gradient relative L2 1e-4; mixed storage
// (LnccHalfFixed vs its CPU reference) loss 1e-5, gradient 2e-3 (bf16 a, b,
// c, as mixed_precision_cuda_test). Every kernel variant (LnccOptions'
// cuda_* fields) is held to the same tolerances, and a z-slab (cuda::
// LnccSlab) must give the whole volume's bits on its own slices (issue 39).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/buffer.h"
#include "common/testing/gpu_test.h"
#include "kernels/registration/lncc.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/test_util.h"

namespace tessera {
namespace registration {
namespace {

using testing::CountDifferentBits;
using testing::DeviceArray;
using testing::ExpectSameBits;
using testing::kNaN;
using testing::RandomUniform;
using testing::RelL2;

struct Case {
  Dims3 dims;
  int window;
  double scale;  // intensity scale
};

struct Variant {
  const char* name;
  LnccCudaKernel kernel;
  bool float_epilogue = false;
  bool async_copy = false;
  bool aligned_rows = false;
  bool stage16 = false;
  bool shipped = false;  // LnccOptions' own cuda_* defaults, the fields above ignored
};

constexpr auto kCol = LnccCudaKernel::kColumnMarch;
// Today's box march first, then the column march's options (issue 37). The
// column march's fixed choices (paired 16-bit accesses where nx is even, the
// float epilogue's approximate reciprocal) run under every variant.
const Variant kVariants[] = {
    {"box", LnccCudaKernel::kBoxMarch},
    {"default kernel plain options", LnccCudaKernel::kDefault},
    {"shipped defaults", LnccCudaKernel::kDefault, false, false, false, false, true},
    {"col", kCol},
    {"col float epilogue", kCol, true},
    {"col async copy", kCol, false, true},
    {"col float epilogue async copy", kCol, true, true},
    {"col async copy aligned rows", kCol, false, true, true},
    {"col float epilogue async copy aligned rows", kCol, true, true, true},
    {"col float epilogue aligned rows", kCol, true, false, true},
    {"col async copy stage16", kCol, false, true, false, true},
    {"col float epilogue async copy stage16", kCol, true, true, false, true},
};

LnccOptions WithVariant(LnccOptions o, const Variant& v) {
  if (v.shipped) return o;
  o.cuda_kernel = v.kernel;
  o.cuda_float_epilogue = v.float_epilogue;
  o.cuda_async_copy = v.async_copy;
  o.cuda_aligned_rows = v.aligned_rows;
  o.cuda_stage16 = v.stage16;
  return o;
}

// One call's outputs: the loss, dL/dW and (mixed storage) the bf16 a, b, c.
struct Outputs {
  float loss = 0;
  std::vector<float> grad;
  std::vector<BFloat16> coef;
};

// Lncc on float F (`fixed`), or LnccHalfFixed on fp16 F (`fixed16` non-null)
// with its a, b, c `coef_offset` elements into their buffer (1: only 2-byte
// aligned, so no paired access touches them); device inputs, outputs
// poisoned with NaN first.
void RunLncc(const Stream& stream, Dims3 d, const LnccOptions& o, const float* fixed, const Half* fixed16,
             const float* warped, VoxelMask mask, int coef_offset, Outputs* out) {
  auto dloss = DeviceArray<float>::Allocate(1, stream);
  auto dgrad = DeviceArray<float>::Allocate(d.size(), stream);
  dloss.Poison(kNaN);
  dgrad.Poison(kNaN);
  if (fixed16 != nullptr) {
    auto dcoef = DeviceArray<BFloat16>::Allocate(3 * d.size() + coef_offset, stream);
    dcoef.Poison(FromFloat<BFloat16>(kNaN));
    ASSERT_TRUE(LnccHalfFixed(stream, fixed16, warped, d, o, dloss.data(), dgrad.data(), dcoef.data() + coef_offset,
                              nullptr, mask)
                    .ok());
    out->coef = dcoef.Download();
    out->coef.erase(out->coef.begin(), out->coef.begin() + coef_offset);
  } else {
    ASSERT_TRUE(Lncc(stream, fixed, warped, d, o, dloss.data(), dgrad.data(), nullptr, mask).ok());
  }
  out->loss = dloss.Download()[0];
  out->grad = dgrad.Download();
}

// The same loss, gradient and coefficients bit for bit.
void ExpectSameOutputs(const Outputs& out, const Outputs& base) {
  EXPECT_FALSE(std::isnan(base.loss));
  EXPECT_EQ(out.loss, base.loss);
  ExpectSameBits(out.grad, base.grad, "dL/dW");
  EXPECT_EQ(CountDifferentBits(out.coef, base.coef), 0) << "coefficients";
}

class LnccCudaVariant : public ::testing::TestWithParam<Variant> {};

TEST_P(LnccCudaVariant, MatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto s = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(s.ok()) << s.status();
  const Stream& stream = *s;
  uint32_t seed = 7;
  LnccWorkspace ws;
  for (const Case& c : {Case{{37, 29, 23}, 7, 1.0}, Case{{44, 21, 57}, 7, 1.0}, Case{{64, 50, 40}, 3, 1.0},
                        Case{{40, 30, 100}, 5, 1.0},
                        Case{{33, 17, 70}, 9, 1000.0}, Case{{20, 21, 22}, 25, 1.0}, Case{{70, 9, 1}, 7, 1.0},
                        Case{{1, 1, 50}, 3, 1.0}}) {
    SCOPED_TRACE(DimsToString(c.dims) + " window " + std::to_string(c.window));
    const Dims3 d = c.dims;
    const auto f = RandomUniform<float>(d.size(), 0.0, c.scale, ++seed);
    auto w = RandomUniform<float>(d.size(), 0.0, c.scale, ++seed);
    for (size_t v = 0; v < w.size(); ++v) w[v] = 0.5f * w[v] + 0.5f * f[v];
    LnccOptions opt;
    opt.window = c.window;
    opt = WithVariant(opt, GetParam());
    float loss_cpu = 0;
    std::vector<float> grad_cpu(d.size());
    ASSERT_TRUE(Lncc(Stream::Cpu(), f.data(), w.data(), d, opt, &loss_cpu, grad_cpu.data()).ok());

    auto df = DeviceArray<float>::FromHost(f, stream);
    auto dw = DeviceArray<float>::FromHost(w, stream);
    auto dloss = DeviceArray<float>::Allocate(1, stream);
    auto dgrad = DeviceArray<float>::Allocate(d.size(), stream);
    dloss.Poison(kNaN);
    dgrad.Poison(kNaN);
    ASSERT_TRUE(Lncc(stream, df.data(), dw.data(), d, opt, dloss.data(), dgrad.data(), &ws).ok());
    const float loss_gpu = dloss.Download()[0];
    EXPECT_NEAR(loss_gpu, loss_cpu, 1e-5 * std::abs(loss_cpu));
    EXPECT_LT(RelL2(dgrad.Download(), grad_cpu), 1e-4);

    // Loss only (no intermediates) and gradient only, without a workspace.
    dloss.Poison(kNaN);
    ASSERT_TRUE(Lncc(stream, df.data(), dw.data(), d, opt, dloss.data(), nullptr).ok());
    EXPECT_EQ(dloss.Download()[0], loss_gpu);
    dgrad.Poison(kNaN);
    ASSERT_TRUE(Lncc(stream, df.data(), dw.data(), d, opt, nullptr, dgrad.data()).ok());
    EXPECT_LT(RelL2(dgrad.Download(), grad_cpu), 1e-4);
  }
}

// Mixed storage (the lean stage's LnccHalfFixed) against its CPU reference.
TEST_P(LnccCudaVariant, MixedStorageMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto s = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(s.ok()) << s.status();
  const Stream& stream = *s;
  uint32_t seed = 70;
  for (const Case& c : {Case{{37, 29, 23}, 7, 1.0}, Case{{44, 21, 19}, 7, 1.0}, Case{{48, 21, 57}, 7, 1.0},
                        Case{{40, 30, 50}, 5, 1.0}, Case{{33, 17, 40}, 9, 100.0}}) {
    SCOPED_TRACE(DimsToString(c.dims) + " window " + std::to_string(c.window));
    const Dims3 d = c.dims;
    const auto f32 = RandomUniform<float>(d.size(), 0.1 * c.scale, c.scale, ++seed);
    auto w = RandomUniform<float>(d.size(), 0.0, c.scale, ++seed);
    std::vector<Half> f(d.size());
    for (size_t v = 0; v < w.size(); ++v) {
      f[v] = FromFloat<Half>(f32[v]);
      w[v] = 0.5f * w[v] + 0.5f * f32[v];
    }
    LnccOptions opt;
    opt.window = c.window;
    opt = WithVariant(opt, GetParam());
    std::vector<float> grad_cpu(d.size());
    const double loss_cpu = cpu::LnccHalfFixed(f.data(), w.data(), d, opt, grad_cpu.data());
    auto df = DeviceArray<Half>::FromHost(f, stream);
    auto dw = DeviceArray<float>::FromHost(w, stream);
    Outputs out;
    RunLncc(stream, d, opt, nullptr, df.data(), dw.data(), VoxelMask{}, 0, &out);
    EXPECT_NEAR(out.loss, loss_cpu, 1e-5 * std::abs(loss_cpu));
    EXPECT_LT(RelL2(out.grad, grad_cpu), 2e-3);
  }
}

// Paired 16-bit loads and stores (issue 37) move the same values as
// one-element accesses: with even nx (their precondition; odd nx falls back)
// they give the same bits as calls whose fp16 F and bf16 a, b, c start one
// element past a 4-byte boundary (one-element accesses), with and without a
// mask, and stay within the mixed tolerance of the CPU reference. Without
// cuda_stage16, whose z pairs (taken where F or a, b, c are 16-byte aligned
// and nx % 8 == 0) round otherwise: StagingGivesSameBits.
TEST_P(LnccCudaVariant, MixedStoragePairedAccessGivesSameBits) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto s = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(s.ok()) << s.status();
  const Stream& stream = *s;
  uint32_t seed = 170;
  for (const Dims3 d : {Dims3{64, 36, 30}, Dims3{38, 20, 17}, Dims3{2, 9, 12}}) {
    for (const bool masked : {false, true}) {
      SCOPED_TRACE(DimsToString(d) + (masked ? " masked" : ""));
      const auto f32 = RandomUniform<float>(d.size(), 0.1, 1.0, ++seed);
      auto w = RandomUniform<float>(d.size(), 0.0, 1.0, ++seed);
      const auto m01 = RandomUniform<float>(d.size(), 0.0, 1.0, ++seed);
      std::vector<Half> f(d.size());
      std::vector<uint8_t> m(d.size());
      int64_t count = 0;
      for (size_t v = 0; v < w.size(); ++v) {
        f[v] = FromFloat<Half>(f32[v]);
        w[v] = 0.5f * w[v] + 0.5f * f32[v];
        m[v] = m01[v] < 0.7f ? 1 : 0;
        count += m[v];
      }
      std::vector<Half> f_after_one(1, FromFloat<Half>(0.f));  // F from element 1: 2-byte aligned
      f_after_one.insert(f_after_one.end(), f.begin(), f.end());
      LnccOptions opt;
      opt.window = 7;
      opt = WithVariant(opt, GetParam());
      opt.cuda_stage16 = false;
      auto df = DeviceArray<Half>::FromHost(f, stream);
      auto df_after_one = DeviceArray<Half>::FromHost(f_after_one, stream);
      auto dw = DeviceArray<float>::FromHost(w, stream);
      auto dm = DeviceArray<uint8_t>::FromHost(m, stream);
      const VoxelMask host_mask = masked ? VoxelMask{m.data(), count} : VoxelMask{};
      const VoxelMask dev_mask = masked ? VoxelMask{dm.data(), count} : VoxelMask{};
      std::vector<float> grad_cpu(d.size());
      const double loss_cpu = cpu::LnccHalfFixed(f.data(), w.data(), d, opt, grad_cpu.data(), host_mask);
      Outputs base;
      RunLncc(stream, d, opt, nullptr, df_after_one.data() + 1, dw.data(), dev_mask, 1, &base);
      // Paired F loads alone, paired a, b, c (the forward's stores and the
      // backward's loads) alone, both.
      for (const int which : {1, 2, 3}) {
        SCOPED_TRACE("paired accesses " + std::to_string(which));
        Outputs out;
        const Half* fixed16 = (which & 1) != 0 ? df.data() : df_after_one.data() + 1;
        RunLncc(stream, d, opt, nullptr, fixed16, dw.data(), dev_mask, (which & 2) != 0 ? 0 : 1, &out);
        ExpectSameOutputs(out, base);
        EXPECT_NEAR(out.loss, loss_cpu, 1e-5 * std::abs(loss_cpu));
        EXPECT_LT(RelL2(out.grad, grad_cpu), 2e-3);
      }
    }
  }
}

// Where values are staged does not change them: aligned rows
// (cuda_aligned_rows) give the same bits as the variant without, float and
// mixed storage, coefficients included, and so does cuda_stage16 for float
// storage (it stages 16-bit channels only); nx % 8 == 0, nx % 4 == 0 and odd
// nx (fallbacks). For mixed storage cuda_stage16 also takes the z sums from
// pair and quad sums (other rounding): there it stays within a quarter of
// the CPU tolerance of the path without (loss 1e-6 relative, gradient 5e-4
// relative L2).
TEST_P(LnccCudaVariant, StagingGivesSameBits) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto s = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(s.ok()) << s.status();
  const Stream& stream = *s;
  uint32_t seed = 270;
  for (const Dims3 d : {Dims3{64, 36, 30}, Dims3{44, 20, 40}, Dims3{37, 18, 17}}) {
    SCOPED_TRACE(DimsToString(d));
    const auto f = RandomUniform<float>(d.size(), 0.1, 1.0, ++seed);
    auto w = RandomUniform<float>(d.size(), 0.0, 1.0, ++seed);
    std::vector<Half> f16(d.size());
    for (size_t v = 0; v < w.size(); ++v) {
      w[v] = 0.5f * w[v] + 0.5f * f[v];
      f16[v] = FromFloat<Half>(f[v]);
    }
    LnccOptions staged;
    staged.window = 7;
    staged = WithVariant(staged, GetParam());
    LnccOptions plain = staged;
    plain.cuda_aligned_rows = false;
    plain.cuda_stage16 = false;
    auto df = DeviceArray<float>::FromHost(f, stream);
    auto df16 = DeviceArray<Half>::FromHost(f16, stream);
    auto dw = DeviceArray<float>::FromHost(w, stream);
    for (const bool mixed : {false, true}) {
      SCOPED_TRACE(mixed ? "mixed" : "float");
      const Half* fixed16 = mixed ? df16.data() : nullptr;
      LnccOptions same_sums = staged;
      if (mixed) same_sums.cuda_stage16 = false;
      Outputs base, out;
      RunLncc(stream, d, plain, df.data(), fixed16, dw.data(), VoxelMask{}, 0, &base);
      RunLncc(stream, d, same_sums, df.data(), fixed16, dw.data(), VoxelMask{}, 0, &out);
      ExpectSameOutputs(out, base);
      if (mixed && staged.cuda_stage16) {
        RunLncc(stream, d, staged, df.data(), fixed16, dw.data(), VoxelMask{}, 0, &out);
        EXPECT_NEAR(out.loss, base.loss, 1e-6 * std::abs(base.loss));
        EXPECT_LT(RelL2(out.grad, base.grad), 5e-4);
      }
    }
  }
}

void SlabMatchesWholeVolume(const Stream& stream, Dims3 d, const Variant& variant) {
  const auto f = RandomUniform<float>(d.size(), 0.0, 1.0, 11);
  auto w = RandomUniform<float>(d.size(), 0.0, 1.0, 12);
  for (size_t v = 0; v < w.size(); ++v) w[v] = 0.5f * w[v] + 0.5f * f[v];
  LnccOptions opt;
  opt.window = 7;
  opt = WithVariant(opt, variant);
  Workspace ws;
  auto df = DeviceArray<float>::FromHost(f, stream);
  auto dw = DeviceArray<float>::FromHost(w, stream);
  auto whole_cc = DeviceArray<double>::Allocate(d.nz, stream);
  auto whole_grad = DeviceArray<float>::Allocate(d.size(), stream);
  ASSERT_TRUE(cuda::LnccSlab(stream, df.data(), dw.data(), d, opt, d.size(), whole_cc.data(), whole_grad.data(), &ws)
                  .ok());
  const std::vector<double> cc_all = whole_cc.Download();
  const std::vector<float> grad_all = whole_grad.Download();
  const int64_t halo = 2 * (opt.window / 2);
  const int64_t plane = d.nx * d.ny;
  for (const int64_t lo : {int64_t{0}, int64_t{9}, int64_t{23}}) {
    const int64_t own_lo = lo, own_hi = lo + 20;
    const int64_t slab_lo = std::max<int64_t>(0, own_lo - halo), slab_hi = std::min<int64_t>(d.nz, own_hi + halo);
    const Dims3 sd{d.nx, d.ny, slab_hi - slab_lo};
    std::vector<float> fs(f.begin() + slab_lo * plane, f.begin() + slab_hi * plane);
    std::vector<float> ws_(w.begin() + slab_lo * plane, w.begin() + slab_hi * plane);
    auto sf = DeviceArray<float>::FromHost(fs, stream);
    auto sw = DeviceArray<float>::FromHost(ws_, stream);
    auto scc = DeviceArray<double>::Allocate(sd.nz, stream);
    auto sgrad = DeviceArray<float>::Allocate(sd.size(), stream);
    ASSERT_TRUE(cuda::LnccSlab(stream, sf.data(), sw.data(), sd, opt, d.size(), scc.data(), sgrad.data(), &ws).ok());
    const std::vector<double> cc_slab = scc.Download();
    const std::vector<float> grad_slab = sgrad.Download();
    for (int64_t k = own_lo; k < own_hi; ++k) {
      ASSERT_EQ(cc_slab[k - slab_lo], cc_all[k]) << "slice " << k << " of slab from " << lo;
      for (int64_t v = 0; v < plane; ++v) {
        ASSERT_EQ(grad_slab[(k - slab_lo) * plane + v], grad_all[k * plane + v]) << "slice " << k << " voxel " << v;
      }
    }
  }
}

// Issue 39: a z-slab gives the whole volume's slice sums and gradient bits
// on its own slices (those whose windows of windows lie inside the slab).
// Odd nx and nx % 4 == 0 (aligned rows' 16-byte copies).
TEST_P(LnccCudaVariant, SlabGivesWholeVolumeBits) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto s = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(s.ok()) << s.status();
  for (const Dims3 d : {Dims3{45, 38, 60}, Dims3{48, 38, 60}}) {
    SCOPED_TRACE(DimsToString(d));
    SlabMatchesWholeVolume(*s, d, GetParam());
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, LnccCudaVariant, ::testing::ValuesIn(kVariants),
                         [](const ::testing::TestParamInfo<Variant>& info) {
                           std::string name = info.param.name;
                           for (char& ch : name) {
                             if (ch == ' ') ch = '_';
                           }
                           return name;
                         });

TEST(LnccCuda, IntermediateMemoryIsThreeVolumes) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto s = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(s.ok()) << s.status();
  const Stream& stream = *s;
  const Dims3 d{64, 64, 64};
  const auto f = RandomUniform<float>(d.size(), 0.0, 1.0, 1);
  auto df = DeviceArray<float>::FromHost(f, stream);
  auto dw = DeviceArray<float>::FromHost(f, stream);
  auto dloss = DeviceArray<float>::Allocate(1, stream);
  auto dgrad = DeviceArray<float>::Allocate(d.size(), stream);
  ASSERT_TRUE(stream.Synchronize().ok());
  auto tracker = std::make_shared<DeviceMemoryTracker>();
  {
    ScopedDeviceMemoryCharge charge(tracker);
    LnccOptions opt;
    ASSERT_TRUE(Lncc(stream, df.data(), dw.data(), d, opt, dloss.data(), dgrad.data()).ok());
  }
  EXPECT_EQ(tracker->current_bytes(), 0u);  // its scratch is freed
  const size_t extra = tracker->peak_bytes();
  const size_t volume = sizeof(float) * d.size();
  EXPECT_GE(extra, 3 * volume);
  EXPECT_LT(extra, 3 * volume + volume / 4);  // plus per-block partials
}

TEST(LnccCuda, RejectsOversizedWindow) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto s = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(s.ok()) << s.status();
  const Dims3 d{8, 8, 8};
  auto df = DeviceArray<float>::FromHost(std::vector<float>(d.size(), 1.0f), *s);
  auto dloss = DeviceArray<float>::Allocate(1, *s);
  LnccOptions opt;
  opt.window = kLnccMaxCudaWindow + 2;
  EXPECT_EQ(Lncc(*s, df.data(), df.data(), d, opt, dloss.data(), nullptr).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace registration
}  // namespace tessera
