// CPU tests of LNCC: the reference against a brute-force window sum, known
// values, and the exact gradient against finite differences in double.
#include "kernels/registration/lncc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/registration/storage16.h"

#include "kernels/registration/test_util.h"

namespace tessera {
namespace registration {
namespace {

using testing::Cast;
using testing::RandomUniform;
using testing::RelL2;

// Brute force from the definition: every window summed directly.
double NaiveLncc(const std::vector<double>& f, const std::vector<double>& w, Dims3 d, int window, double eps) {
  const int r = window / 2;
  const double n = double(window) * window * window;
  double total = 0;
  for (int64_t k = 0; k < d.nz; ++k) {
    for (int64_t j = 0; j < d.ny; ++j) {
      for (int64_t i = 0; i < d.nx; ++i) {
        double sf = 0, sw = 0, sff = 0, sww = 0, sfw = 0;
        for (int64_t kk = k - r; kk <= k + r; ++kk) {
          for (int64_t jj = j - r; jj <= j + r; ++jj) {
            for (int64_t ii = i - r; ii <= i + r; ++ii) {
              if (ii < 0 || jj < 0 || kk < 0 || ii >= d.nx || jj >= d.ny || kk >= d.nz) continue;
              const double a = f[d.index(ii, jj, kk)], b = w[d.index(ii, jj, kk)];
              sf += a;
              sw += b;
              sff += a * a;
              sww += b * b;
              sfw += a * b;
            }
          }
        }
        const double cross = sfw - sf * sw / n;
        const double vf = std::max(sff - sf * sf / n, 0.0), vw = std::max(sww - sw * sw / n, 0.0);
        total += cross * cross / (vf * vw + eps);
      }
    }
  }
  return -total / d.size();
}

TEST(LnccCpu, MatchesBruteForce) {
  const Dims3 d{11, 9, 8};
  const auto f = RandomUniform<double>(d.size(), 0.0, 1.0, 1);
  auto w = RandomUniform<double>(d.size(), 0.0, 1.0, 2);
  for (size_t v = 0; v < w.size(); ++v) w[v] = 0.6 * w[v] + 0.4 * f[v];  // correlated
  for (int window : {1, 3, 5, 7, 9}) {
    LnccOptions opt;
    opt.window = window;
    const double want = NaiveLncc(f, w, d, window, opt.eps);
    EXPECT_NEAR(cpu::Lncc<double>(f.data(), w.data(), d, opt, nullptr), want, 1e-12 * std::max(1.0, std::abs(want)))
        << "window " << window;
    const auto ff = Cast<float>(f), wf = Cast<float>(w);
    float loss = 0;
    ASSERT_TRUE(Lncc(Stream::Cpu(), ff.data(), wf.data(), d, opt, &loss, nullptr).ok());
    EXPECT_NEAR(loss, want, 1e-5 * std::max(1.0, std::abs(want))) << "window " << window;
    if (window > 1) {
      EXPECT_LT(want, -0.05);
    } else {
      EXPECT_EQ(want, 0.0);  // a single voxel has no variance
    }
  }
}

TEST(LnccCpu, IdenticalImagesGiveMinusOne) {
  const Dims3 d{16, 12, 10};
  const auto f = RandomUniform<float>(d.size(), 0.0, 1.0, 3);
  LnccOptions opt;
  opt.window = 5;
  float loss = 0;
  std::vector<float> grad(d.size(), testing::kNaN);
  ASSERT_TRUE(Lncc(Stream::Cpu(), f.data(), f.data(), d, opt, &loss, grad.data()).ok());
  EXPECT_NEAR(loss, -1.0, 1e-4);
  // At the optimum the gradient is ~0 (only eps breaks it).
  double max_abs = 0;
  for (float g : grad) max_abs = std::max(max_abs, double(std::abs(g)));
  EXPECT_LT(max_abs, 1e-5);
  // Affine intensity changes keep cc = 1 away from the zero-padded border.
  std::vector<float> w(f.size());
  for (size_t v = 0; v < f.size(); ++v) w[v] = 3.0f * f[v] + 0.0f;
  ASSERT_TRUE(Lncc(Stream::Cpu(), f.data(), w.data(), d, opt, &loss, nullptr).ok());
  EXPECT_NEAR(loss, -1.0, 1e-4);
}

TEST(LnccCpu, GradientMatchesFiniteDifferences) {
  const Dims3 d{9, 8, 7};
  const auto f = RandomUniform<double>(d.size(), 0.0, 1.0, 4);
  auto w = RandomUniform<double>(d.size(), 0.0, 1.0, 5);
  for (size_t v = 0; v < w.size(); ++v) w[v] = 0.5 * w[v] + 0.5 * f[v];
  for (int window : {3, 5}) {
    LnccOptions opt;
    opt.window = window;
    std::vector<double> grad(d.size());
    cpu::Lncc<double>(f.data(), w.data(), d, opt, grad.data());
    const double h = 1e-6;
    double max_err = 0, max_ref = 0;
    for (size_t v = 0; v < w.size(); ++v) {
      const double saved = w[v];
      w[v] = saved + h;
      const double lp = cpu::Lncc<double>(f.data(), w.data(), d, opt, nullptr);
      w[v] = saved - h;
      const double lm = cpu::Lncc<double>(f.data(), w.data(), d, opt, nullptr);
      w[v] = saved;
      const double fd = (lp - lm) / (2 * h);
      max_err = std::max(max_err, std::abs(fd - grad[v]));
      max_ref = std::max(max_ref, std::abs(fd));
    }
    EXPECT_GT(max_ref, 1e-4);
    EXPECT_LT(max_err / max_ref, 1e-6) << "window " << window << ": " << max_err << " of " << max_ref;

    // The float backend agrees with the double reference.
    const auto ff = Cast<float>(f), wf = Cast<float>(w);
    std::vector<float> gf(d.size(), testing::kNaN);
    ASSERT_TRUE(Lncc(Stream::Cpu(), ff.data(), wf.data(), d, opt, nullptr, gf.data()).ok());
    EXPECT_LT(RelL2(gf, grad), 1e-4) << "window " << window;
  }
}

TEST(LnccCpu, RejectsBadArguments) {
  std::vector<float> a(8, 1.0f);
  float loss;
  LnccOptions opt;
  opt.window = 4;
  EXPECT_EQ(Lncc(Stream::Cpu(), a.data(), a.data(), {2, 2, 2}, opt, &loss, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  opt.window = 3;
  EXPECT_EQ(Lncc(Stream::Cpu(), a.data(), nullptr, {2, 2, 2}, opt, &loss, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Lncc(Stream::Cpu(), a.data(), a.data(), {2, 0, 2}, opt, &loss, nullptr).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Lncc(Stream::Cpu(), a.data(), a.data(), {2, 2, 2}, opt, &loss, nullptr).ok());
}

// Issue 38: without a mask the per-voxel terms run vectorised (LnccTermsRun);
// a mask holding every voxel takes the scalar loop: the same bits, float,
// double and the mixed-precision reference (bf16 a, b, c), values that
// round to bf16 boundaries included.
TEST(LnccCpu, VectorTermsMatchScalarTermsBitForBit) {
  const Dims3 d{23, 17, 13};
  const std::vector<uint8_t> all(d.size(), 1);
  const VoxelMask every{all.data(), d.size()};
  for (const int window : {3, 7}) {
    SCOPED_TRACE(window);
    LnccOptions o;
    o.window = window;
    auto f = RandomUniform<float>(d.size(), 0.0, 1.0, 31);
    auto w = RandomUniform<float>(d.size(), 0.0, 1.0, 32);
    for (int64_t i = 0; i < d.size(); i += 11) w[i] = f[i];  // windows of exact correlation
    std::vector<float> g0(d.size()), g1(d.size());
    double l0 = cpu::Lncc<float>(f.data(), w.data(), d, o, g0.data());
    double l1 = cpu::Lncc<float>(f.data(), w.data(), d, o, g1.data(), every);
    EXPECT_EQ(std::memcmp(&l0, &l1, sizeof l0), 0);
    EXPECT_EQ(testing::CountDifferentBits(g0, g1), 0);
    std::vector<Half> h(d.size());
    for (int64_t i = 0; i < d.size(); ++i) h[i] = FromFloat<Half>(f[i]);
    l0 = cpu::LnccHalfFixed(h.data(), w.data(), d, o, g0.data());
    l1 = cpu::LnccHalfFixed(h.data(), w.data(), d, o, g1.data(), every);
    EXPECT_EQ(std::memcmp(&l0, &l1, sizeof l0), 0);
    EXPECT_EQ(testing::CountDifferentBits(g0, g1), 0);
    const auto fd = Cast<double>(f), wd = Cast<double>(w);
    std::vector<double> gd0(d.size()), gd1(d.size());
    l0 = cpu::Lncc<double>(fd.data(), wd.data(), d, o, gd0.data());
    l1 = cpu::Lncc<double>(fd.data(), wd.data(), d, o, gd1.data(), every);
    EXPECT_EQ(std::memcmp(&l0, &l1, sizeof l0), 0);
    EXPECT_EQ(testing::CountDifferentBits(gd0, gd1), 0);
  }
}

// Issue 38: cpu::LnccScratch gives the fresh-volume functions' bits on every
// call of a sequence that keeps the fixed box sums (new warped images, a
// mask, the gradient over W, loss only), forgets them on a new fixed image,
// size or window, and after ForgetFixed when the fixed image changed in place.
TEST(LnccCpu, ScratchMatchesFreshVolumesBitForBit) {
  const Dims3 big{19, 14, 11}, small{9, 12, 7};
  auto f = RandomUniform<float>(big.size(), 0.0, 1.0, 21);
  const auto f2 = RandomUniform<float>(big.size(), 0.0, 1.0, 22);
  // fp16 copies, rewritten only where the float image changes (in place).
  std::vector<Half> h(big.size()), h2(big.size());
  const auto to_half = [&] {
    for (int64_t i = 0; i < big.size(); ++i) {
      h[i] = FromFloat<Half>(f[i]);
      h2[i] = FromFloat<Half>(f2[i]);
    }
  };
  to_half();
  std::vector<uint8_t> mask_bytes(big.size());
  int64_t mask_count = 0;
  for (int64_t i = 0; i < big.size(); ++i) {
    mask_bytes[i] = (i * 7) % 5 != 0;
    mask_count += mask_bytes[i];
  }
  const VoxelMask mask{mask_bytes.data(), mask_count};
  cpu::LnccScratch scratch;
  int step = 0;
  // One call through the scratch and the same through fresh volumes.
  const auto expect_same = [&](const float* fixed, Dims3 d, int window, bool grad, VoxelMask m, bool half) {
    SCOPED_TRACE(::testing::Message() << "step " << step << " window " << window << (half ? " fp16" : " float"));
    const auto w = RandomUniform<float>(d.size(), 0.0, 1.0, 100 + step++);
    LnccOptions o;
    o.window = window;
    std::vector<float> g_scratch(w), g_fresh(d.size(), 0.f);  // the scratch's gradient over W, as the stage does
    double want = 0;
    absl::StatusOr<double> got;
    if (half) {
      const Half* fh = fixed == f.data() ? h.data() : h2.data();
      want = cpu::LnccHalfFixed(fh, w.data(), d, o, grad ? g_fresh.data() : nullptr, m);
      got = scratch.LnccHalfFixed(fh, g_scratch.data(), d, o, grad ? g_scratch.data() : nullptr, m);
    } else {
      want = cpu::Lncc<float>(fixed, w.data(), d, o, grad ? g_fresh.data() : nullptr, m);
      got = scratch.Lncc(fixed, g_scratch.data(), d, o, grad ? g_scratch.data() : nullptr, m);
    }
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(std::memcmp(&want, &*got, sizeof want), 0) << want << " vs " << *got;
    if (grad) EXPECT_EQ(testing::CountDifferentBits(g_fresh, g_scratch), 0);
    // Grown to the largest level so far, never shrunk.
    EXPECT_EQ(static_cast<int64_t>(scratch.capacity()), cpu::LnccScratch::Bytes(big));
  };
  for (const bool half : {false, true}) {
    expect_same(f.data(), big, 5, true, {}, half);
    expect_same(f.data(), big, 5, true, {}, half);    // kept sums
    expect_same(f.data(), big, 5, false, mask, half); // kept sums, loss only, a mask
    expect_same(f.data(), big, 5, true, mask, half);
    expect_same(f2.data(), big, 5, true, {}, half);   // another fixed image
    expect_same(f2.data(), big, 3, true, {}, half);   // another window
    expect_same(f2.data(), small, 3, true, {}, half); // a smaller level in the same memory
    expect_same(f2.data(), big, 3, true, {}, half);
    for (float& v : f) v = 1.f - v;  // in place: the caller says so
    to_half();
    scratch.ForgetFixed();
    expect_same(f.data(), big, 3, true, {}, half);
  }
  scratch.Release();
  EXPECT_EQ(scratch.capacity(), 0u);
  LnccOptions even;
  even.window = 4;
  EXPECT_EQ(scratch.Lncc(f.data(), f.data(), big, even, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

// The dispatchers on a CPU stream with an LnccWorkspace (the registration
// metrics' kept scratch) store the loss and gradient that they store without
// one, call after call (the second reuses the fixed sums), and leave the
// CUDA half of the workspace empty.
TEST(LnccCpu, DispatchersWithWorkspaceMatchWithout) {
  const Dims3 d{17, 13, 9};
  const auto f = RandomUniform<float>(d.size(), 0.0, 1.0, 31);
  std::vector<Half> h(d.size());
  for (int64_t i = 0; i < d.size(); ++i) h[i] = FromFloat<Half>(f[i]);
  std::vector<float> coefficients(3 * d.size());
  LnccOptions o;
  o.window = 5;
  LnccWorkspace workspace;
  for (int kind = 0; kind < 3; ++kind) {
    for (int call = 0; call < 2; ++call) {
      SCOPED_TRACE(::testing::Message() << "kind " << kind << " call " << call);
      const auto w = RandomUniform<float>(d.size(), 0.0, 1.0, 40 + 2 * kind + call);
      std::vector<float> g_with(w), g_without(w);  // the gradient over W, as the stages do
      float loss_with = 0, loss_without = 0;
      const auto run = [&](std::vector<float>& g, float* loss, LnccWorkspace* ws) {
        if (kind == 0) return Lncc(Stream::Cpu(), f.data(), g.data(), d, o, loss, g.data(), ws);
        if (kind == 1) {
          return LnccWithCoefficients(Stream::Cpu(), f.data(), g.data(), d, o, loss, g.data(), coefficients.data(), ws);
        }
        return LnccHalfFixed(Stream::Cpu(), h.data(), g.data(), d, o, loss, g.data(), nullptr, ws);
      };
      ASSERT_TRUE(run(g_with, &loss_with, &workspace).ok());
      ASSERT_TRUE(run(g_without, &loss_without, nullptr).ok());
      EXPECT_EQ(std::memcmp(&loss_with, &loss_without, sizeof loss_with), 0) << loss_with << " vs " << loss_without;
      EXPECT_EQ(testing::CountDifferentBits(g_with, g_without), 0);
      EXPECT_EQ(static_cast<int64_t>(workspace.host.capacity()), cpu::LnccScratch::Bytes(d));
      EXPECT_EQ(workspace.device.capacity(), 0u);
    }
  }
  workspace.Release();
  EXPECT_EQ(workspace.host.capacity(), 0u);
}

}  // namespace
}  // namespace registration
}  // namespace tessera
