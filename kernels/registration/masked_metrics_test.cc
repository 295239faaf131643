// Issue 34: the metrics restricted to a voxel mask (VoxelMask, types.h; MI's
// uint8 mask) on the CPU, against plain references computed on the masked
// voxels alone, on random non-zero images and random masks:
// - MSE: loss within 1e-6 relative of the mean over the mask, gradient
//   2 (W - F) / count inside within 1e-6, exactly 0 outside;
// - LNCC: loss within 1e-9 relative of a brute-force double reference (every
//   window summed directly), gradient within 1e-6 relative of central finite
//   differences of the double kernel;
// - MI: loss and gradient equal (1e-9 relative) to MI on the masked voxels
//   gathered into an array of their own;
// and "ignored nowhere": values changed where the mask is 0 (for LNCC: at
// voxels farther than the window radius from every centre in the mask)
// change neither the loss nor the gradient inside the mask, bit for bit; an
// all-ones mask gives the unmasked bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/registration/lncc.h"
#include "kernels/registration/mse.h"
#include "kernels/registration/mutual_info.h"
#include "kernels/registration/voxel_mask.h"

namespace tessera {
namespace registration {
namespace {

std::vector<float> Random(int64_t n, uint32_t seed, float lo = 0.05f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// A blob-shaped random mask (a ball plus random voxels), never empty or full.
std::vector<uint8_t> RandomMask(Dims3 d, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution coin(0.15);
  std::vector<uint8_t> m(d.size());
  for (int64_t k = 0; k < d.nz; ++k) {
    for (int64_t j = 0; j < d.ny; ++j) {
      for (int64_t i = 0; i < d.nx; ++i) {
        const double dx = i - 0.4 * d.nx, dy = j - 0.5 * d.ny, dz = k - 0.5 * d.nz;
        const bool ball = dx * dx + dy * dy + dz * dz < 0.1 * (d.nx * d.nx + d.ny * d.ny);
        m[d.index(i, j, k)] = ball || coin(rng) ? 1 : 0;
      }
    }
  }
  return m;
}

int64_t Count(const std::vector<uint8_t>& m) {
  int64_t c = 0;
  for (uint8_t v : m) c += v != 0;
  return c;
}

TEST(CombineMasks, AndOfBothAndCount) {
  const int64_t n = 1000;
  std::vector<uint8_t> f(n), out(n);
  std::vector<int32_t> m(n);
  int64_t expected = 0;
  for (int64_t v = 0; v < n; ++v) {
    f[v] = v % 3 != 0;
    m[v] = v % 5 == 0 ? 0 : static_cast<int32_t>(v);
    expected += f[v] && m[v];
  }
  EXPECT_EQ(CombineMasks(Stream::Cpu(), f.data(), m.data(), n, out.data()).value(), expected);
  for (int64_t v = 0; v < n; ++v) ASSERT_EQ(out[v], (f[v] && m[v]) ? 1 : 0) << v;
  EXPECT_EQ(CombineMasks(Stream::Cpu(), nullptr, m.data(), n, out.data()).value(), n - n / 5);
  EXPECT_EQ(CombineMasks(Stream::Cpu(), f.data(), nullptr, n, out.data()).value(), n - (n + 2) / 3);
  EXPECT_EQ(CombineMasks(Stream::Cpu(), nullptr, nullptr, n, out.data()).value(), n);
}

TEST(MaskedMse, EqualsMeanOverTheMask) {
  const Dims3 d{19, 14, 11};
  const auto f = Random(d.size(), 1), w = Random(d.size(), 2);
  const auto m = RandomMask(d, 3);
  const int64_t count = Count(m);
  ASSERT_GT(count, 0);
  ASSERT_LT(count, d.size());
  std::vector<float> grad(d.size(), NAN);
  float loss = 0;
  ASSERT_TRUE(Mse(Stream::Cpu(), f.data(), w.data(), d, &loss, grad.data(), nullptr, {m.data(), count}).ok());
  double ref = 0;
  for (int64_t v = 0; v < d.size(); ++v) {
    if (m[v]) ref += (double(w[v]) - f[v]) * (double(w[v]) - f[v]);
  }
  ref /= count;
  EXPECT_NEAR(loss, ref, 1e-6 * ref);
  for (int64_t v = 0; v < d.size(); ++v) {
    const double g = m[v] ? 2.0 * (double(w[v]) - f[v]) / count : 0.0;
    if (m[v]) {
      ASSERT_NEAR(grad[v], g, 1e-6 * std::abs(g) + 1e-12) << v;
    } else {
      ASSERT_EQ(grad[v], 0.f) << v;
    }
  }
}

TEST(MaskedMse, IgnoredNowhereAndAllOnesIsUnmasked) {
  const Dims3 d{17, 13, 9};
  auto f = Random(d.size(), 4), w = Random(d.size(), 5);
  const auto m = RandomMask(d, 6);
  const VoxelMask mask{m.data(), Count(m)};
  std::vector<float> g1(d.size()), g2(d.size());
  float l1 = 0, l2 = 0;
  ASSERT_TRUE(Mse(Stream::Cpu(), f.data(), w.data(), d, &l1, g1.data(), nullptr, mask).ok());
  const auto noise = Random(d.size(), 7, 2.f, 9.f);
  for (int64_t v = 0; v < d.size(); ++v) {
    if (!m[v]) f[v] = noise[v], w[v] = 1.f - noise[v];
  }
  ASSERT_TRUE(Mse(Stream::Cpu(), f.data(), w.data(), d, &l2, g2.data(), nullptr, mask).ok());
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(g1, g2);
  // All ones = no mask, bit for bit.
  const std::vector<uint8_t> ones(d.size(), 1);
  ASSERT_TRUE(Mse(Stream::Cpu(), f.data(), w.data(), d, &l1, g1.data(), nullptr, {ones.data(), d.size()}).ok());
  ASSERT_TRUE(Mse(Stream::Cpu(), f.data(), w.data(), d, &l2, g2.data()).ok());
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(g1, g2);
  // An empty mask is refused.
  EXPECT_EQ(Mse(Stream::Cpu(), f.data(), w.data(), d, &l1, nullptr, nullptr, {ones.data(), 0}).code(),
            absl::StatusCode::kInvalidArgument);
}

// Brute force: every window summed directly in double, zero padding.
double LnccReference(const std::vector<double>& f, const std::vector<double>& w, Dims3 d, int window, double eps,
                     const std::vector<uint8_t>& m) {
  const int r = window / 2;
  const double n = double(window) * window * window;
  double sum = 0;
  int64_t count = 0;
  for (int64_t k = 0; k < d.nz; ++k) {
    for (int64_t j = 0; j < d.ny; ++j) {
      for (int64_t i = 0; i < d.nx; ++i) {
        if (!m[d.index(i, j, k)]) continue;
        double sf = 0, sw = 0, sff = 0, sww = 0, sfw = 0;
        for (int64_t c = k - r; c <= k + r; ++c) {
          for (int64_t b = j - r; b <= j + r; ++b) {
            for (int64_t a = i - r; a <= i + r; ++a) {
              if (a < 0 || b < 0 || c < 0 || a >= d.nx || b >= d.ny || c >= d.nz) continue;
              const double x = f[d.index(a, b, c)], y = w[d.index(a, b, c)];
              sf += x, sw += y, sff += x * x, sww += y * y, sfw += x * y;
            }
          }
        }
        const double cross = sfw - sf * sw / n;
        const double vf = std::max(0.0, sff - sf * sf / n), vw = std::max(0.0, sww - sw * sw / n);
        sum += cross * cross / (vf * vw + eps);
        ++count;
      }
    }
  }
  return -sum / count;
}

TEST(MaskedLncc, LossEqualsBruteForceAndGradientFiniteDifferences) {
  const Dims3 d{11, 9, 8};
  const auto f32 = Random(d.size(), 8), w32 = Random(d.size(), 9);
  const auto m = RandomMask(d, 10);
  const VoxelMask mask{m.data(), Count(m)};
  LnccOptions o;
  o.window = 3;
  std::vector<double> f(f32.begin(), f32.end()), w(w32.begin(), w32.end()), grad(d.size());
  const double loss = cpu::Lncc<double>(f.data(), w.data(), d, o, grad.data(), mask);
  const double ref = LnccReference(f, w, d, o.window, o.eps, m);
  EXPECT_NEAR(loss, ref, 1e-9 * std::abs(ref));
  // The float kernel agrees with the double one.
  float loss32 = 0;
  std::vector<float> grad32(d.size());
  ASSERT_TRUE(Lncc(Stream::Cpu(), f32.data(), w32.data(), d, o, &loss32, grad32.data(), nullptr, mask).ok());
  EXPECT_NEAR(loss32, loss, 1e-5 * std::abs(loss));
  double max_grad = 0;
  for (double g : grad) max_grad = std::max(max_grad, std::abs(g));
  const double h = 1e-6;
  for (int64_t v = 0; v < d.size(); v += 7) {
    std::vector<double> wp = w, wm = w;
    wp[v] += h;
    wm[v] -= h;
    const double fd = (cpu::Lncc<double>(f.data(), wp.data(), d, o, nullptr, mask) -
                       cpu::Lncc<double>(f.data(), wm.data(), d, o, nullptr, mask)) / (2 * h);
    ASSERT_NEAR(grad[v], fd, 1e-6 * max_grad) << v;
    ASSERT_NEAR(grad32[v], grad[v], 1e-4 * max_grad) << v;
  }
}

TEST(MaskedLncc, IgnoredNowhereAndAllOnesIsUnmasked) {
  const Dims3 d{21, 17, 13};
  auto f = Random(d.size(), 11), w = Random(d.size(), 12);
  // A box of centres; voxels farther than r from it are changed.
  std::vector<uint8_t> m(d.size(), 0);
  for (int64_t k = 3; k < 9; ++k)
    for (int64_t j = 4; j < 12; ++j)
      for (int64_t i = 5; i < 14; ++i) m[d.index(i, j, k)] = 1;
  const VoxelMask mask{m.data(), Count(m)};
  LnccOptions o;
  o.window = 5;
  const int r = o.window / 2;
  std::vector<float> g1(d.size()), g2(d.size());
  float l1 = 0, l2 = 0;
  ASSERT_TRUE(Lncc(Stream::Cpu(), f.data(), w.data(), d, o, &l1, g1.data(), nullptr, mask).ok());
  const auto noise = Random(d.size(), 13, 2.f, 9.f);
  for (int64_t k = 0; k < d.nz; ++k)
    for (int64_t j = 0; j < d.ny; ++j)
      for (int64_t i = 0; i < d.nx; ++i) {
        const bool near = i >= 5 - r && i < 14 + r && j >= 4 - r && j < 12 + r && k >= 3 - r && k < 9 + r;
        if (!near) f[d.index(i, j, k)] = noise[d.index(i, j, k)], w[d.index(i, j, k)] = 0.5f * noise[d.index(i, j, k)];
      }
  ASSERT_TRUE(Lncc(Stream::Cpu(), f.data(), w.data(), d, o, &l2, g2.data(), nullptr, mask).ok());
  EXPECT_EQ(l1, l2);
  for (int64_t v = 0; v < d.size(); ++v) {
    if (m[v]) {
      ASSERT_EQ(g1[v], g2[v]) << v;
    }
  }
  // All ones = no mask, bit for bit (also with caller coefficients).
  const std::vector<uint8_t> ones(d.size(), 1);
  std::vector<float> coef(3 * d.size());
  ASSERT_TRUE(LnccWithCoefficients(Stream::Cpu(), f.data(), w.data(), d, o, &l1, g1.data(), coef.data(), nullptr,
                                   {ones.data(), d.size()}).ok());
  ASSERT_TRUE(Lncc(Stream::Cpu(), f.data(), w.data(), d, o, &l2, g2.data()).ok());
  EXPECT_EQ(l1, l2);
  EXPECT_EQ(g1, g2);
}

NDArray Array(const std::vector<float>& v, Shape shape) {
  NDArray a = NDArray::Allocate(shape, DType::kFloat32).value();
  std::copy(v.begin(), v.end(), a.data<float>());
  return a;
}

TEST(MaskedMi, EqualsMiOfTheMaskedVoxelsAlone) {
  const Dims3 d{23, 19, 15};
  auto f = Random(d.size(), 14, 0.f, 1.f), w = Random(d.size(), 15, 0.f, 1.f);
  for (int64_t v = 0; v < d.size(); ++v) w[v] = 0.6f * f[v] + 0.4f * w[v];  // dependent: MI > 0
  const auto m = RandomMask(d, 16);
  const Shape shape = {d.nx, d.ny, d.nz};
  NDArray mask = NDArray::Allocate(shape, DType::kUInt8).value();
  std::copy(m.begin(), m.end(), mask.data<uint8_t>());
  std::vector<float> fk, wk;
  for (int64_t v = 0; v < d.size(); ++v) {
    if (m[v]) fk.push_back(f[v]), wk.push_back(w[v]);
  }
  const int64_t k = static_cast<int64_t>(fk.size());
  MattesMiOptions o;
  NDArray grad = Array(std::vector<float>(d.size(), NAN), shape), grad_k = Array(std::vector<float>(k), {k, 1, 1});
  const MattesMiResult r = MattesMutualInformation(Array(f, shape), Array(w, shape), &mask, o, &grad, Stream::Cpu()).value();
  const MattesMiResult rk =
      MattesMutualInformation(Array(fk, {k, 1, 1}), Array(wk, {k, 1, 1}), nullptr, o, &grad_k, Stream::Cpu()).value();
  EXPECT_GT(rk.mutual_information, 0.05);
  EXPECT_NEAR(r.loss, rk.loss, 1e-9 * std::abs(rk.loss));
  double max_grad = 0;
  for (int64_t i = 0; i < k; ++i) max_grad = std::max(max_grad, double(std::abs(grad_k.data<float>()[i])));
  int64_t i = 0;
  for (int64_t v = 0; v < d.size(); ++v) {
    if (m[v]) {
      ASSERT_NEAR(grad.data<float>()[v], grad_k.data<float>()[i++], 1e-6 * max_grad) << v;
    } else {
      ASSERT_EQ(grad.data<float>()[v], 0.f) << v;
    }
  }
  // Ignored nowhere: new values where the mask is 0.
  const auto noise = Random(d.size(), 17, 0.f, 1.f);
  for (int64_t v = 0; v < d.size(); ++v) {
    if (!m[v]) f[v] = noise[v], w[v] = 1.f - noise[v];
  }
  NDArray grad2 = Array(std::vector<float>(d.size(), NAN), shape);
  const MattesMiResult r2 =
      MattesMutualInformation(Array(f, shape), Array(w, shape), &mask, o, &grad2, Stream::Cpu()).value();
  EXPECT_EQ(r.loss, r2.loss);
  for (int64_t v = 0; v < d.size(); ++v) ASSERT_EQ(grad.data<float>()[v], grad2.data<float>()[v]) << v;
}

}  // namespace
}  // namespace registration
}  // namespace tessera
