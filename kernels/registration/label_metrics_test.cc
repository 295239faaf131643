#include "kernels/registration/label_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

namespace tessera {
namespace registration {
namespace {

using label_metrics_internal::Percentile;
using label_metrics_internal::SquaredEdt;

template <typename T>
NDArray Labels(const Shape& shape, T value = 0) {
  NDArray a = NDArray::Allocate(shape, DTypeOf<T>::value).value();
  std::fill(a.data<T>(), a.data<T>() + a.num_elements(), value);
  return a;
}

TEST(SquaredEdt, MatchesBruteForceWithAnisotropicSpacing) {
  std::mt19937 rng(1);
  const int64_t nx = 13, ny = 9, nz = 7;
  const std::array<double, 3> sp = {0.7, 1.3, 2.1};
  for (double density : {0.002, 0.02, 0.3}) {
    std::vector<uint8_t> sites(nx * ny * nz);
    std::bernoulli_distribution b(density);
    for (auto& s : sites) s = b(rng);
    sites[5] = 1;  // at least one
    std::vector<double> edt(sites.size());
    SquaredEdt(sites.data(), nx, ny, nz, sp, edt.data());
    for (int64_t v = 0; v < nx * ny * nz; ++v) {
      double best = std::numeric_limits<double>::infinity();
      for (int64_t s = 0; s < nx * ny * nz; ++s) {
        if (!sites[s]) continue;
        const double dx = sp[0] * double(v % nx - s % nx), dy = sp[1] * double((v / nx) % ny - (s / nx) % ny),
                     dz = sp[2] * double(v / (nx * ny) - s / (nx * ny));
        best = std::min(best, dx * dx + dy * dy + dz * dz);
      }
      ASSERT_NEAR(edt[v], best, 1e-9 * std::max(1.0, best)) << v;
    }
  }
  std::vector<uint8_t> none(8, 0);
  std::vector<double> out(8);
  SquaredEdt(none.data(), 2, 2, 2, sp, out.data());
  for (double d : out) EXPECT_TRUE(std::isinf(d));
}

TEST(Percentile, LinearInterpolationLikeNumpy) {
  std::vector<double> v = {4, 1, 3, 2};
  EXPECT_DOUBLE_EQ(Percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(Percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(Percentile(v, 0), 1);
  std::vector<double> one = {7};
  EXPECT_DOUBLE_EQ(Percentile(one, 95), 7);
}

TEST(LabelMetrics, DiceCountsAndMissingLabels) {
  NDArray a = Labels<uint8_t>({4, 3, 2}), b = Labels<int32_t>({4, 3, 2});
  // label 1: a has 6 voxels, b has 4 of them + 2 others; label 2 only in a; label 3 only in b.
  for (int v = 0; v < 6; ++v) a.data<uint8_t>()[v] = 1;
  for (int v = 2; v < 8; ++v) b.data<int32_t>()[v] = 1;
  a.data<uint8_t>()[20] = 2;
  b.data<int32_t>()[23] = 3;
  LabelMetrics m = ComputeLabelMetrics(a, b).value();
  ASSERT_EQ(m.labels.size(), 3u);
  EXPECT_EQ(m.labels[0].label, 1);
  EXPECT_EQ(m.labels[0].voxels_a, 6);
  EXPECT_EQ(m.labels[0].voxels_b, 6);
  EXPECT_EQ(m.labels[0].intersection, 4);
  EXPECT_DOUBLE_EQ(m.labels[0].dice, 8.0 / 12.0);
  EXPECT_EQ(m.labels[1].label, 2);
  EXPECT_EQ(m.labels[1].dice, 0.0);
  EXPECT_TRUE(std::isinf(m.labels[1].hd95_mm));
  EXPECT_TRUE(std::isinf(m.labels[2].hd90_mm));
  EXPECT_DOUBLE_EQ(m.mean_dice, (8.0 / 12.0) / 3.0);
  EXPECT_DOUBLE_EQ(m.mean_hd95_mm, m.labels[0].hd95_mm);  // only label 1 is in both
  EXPECT_TRUE(std::isfinite(m.mean_hd95_mm));
  // Background counts when asked.
  LabelMetricsOptions o;
  o.ignore_background = false;
  o.hausdorff = false;
  m = ComputeLabelMetrics(a, b, o).value();
  ASSERT_EQ(m.labels.size(), 4u);
  EXPECT_EQ(m.labels[0].label, 0);
  EXPECT_EQ(m.labels[0].voxels_a, 24 - 7);
  EXPECT_TRUE(std::isnan(m.labels[0].hd95_mm));
}

TEST(LabelMetrics, IdenticalMapsAndShiftedCubes) {
  NDArray a = Labels<int16_t>({30, 24, 20});
  for (int64_t k = 4; k < 14; ++k)
    for (int64_t j = 6; j < 16; ++j)
      for (int64_t i = 8; i < 18; ++i) a.data<int16_t>()[i + 30 * (j + 24 * k)] = 5;
  LabelMetrics same = ComputeLabelMetrics(a, a).value();
  ASSERT_EQ(same.labels.size(), 1u);
  EXPECT_EQ(same.labels[0].dice, 1.0);
  EXPECT_EQ(same.labels[0].hd95_mm, 0.0);
  EXPECT_EQ(same.labels[0].hd100_mm, 0.0);
  // Shift by 3 voxels along x with 2 mm spacing: the far faces are 6 mm apart.
  NDArray b = Labels<int16_t>({30, 24, 20});
  for (int64_t v = 0; v < a.num_elements(); ++v) {
    if (a.data<int16_t>()[v] == 5) b.data<int16_t>()[v + 3] = 5;
  }
  LabelMetricsOptions o;
  o.spacing_mm = {2.0, 1.0, 1.0};
  LabelMetrics m = ComputeLabelMetrics(a, b, o).value();
  EXPECT_DOUBLE_EQ(m.labels[0].dice, 2.0 * 700 / 2000);
  EXPECT_DOUBLE_EQ(m.labels[0].hd100_mm, 6.0);
  EXPECT_GT(m.labels[0].hd95_mm, 0.0);
  EXPECT_LE(m.labels[0].hd90_mm, m.labels[0].hd95_mm);
  EXPECT_LE(m.labels[0].hd95_mm, 6.0);
}

// Against brute-force surface-to-surface distances on random blobs.
TEST(LabelMetrics, HausdorffMatchesBruteForce) {
  std::mt19937 rng(3);
  const int64_t nx = 24, ny = 20, nz = 16;
  const std::array<double, 3> sp = {0.8, 1.1, 1.7};
  auto blobs = [&](int seed_shift) {
    NDArray m = Labels<int32_t>({nx, ny, nz});
    std::uniform_real_distribution<double> u(0, 1);
    for (int label = 1; label <= 3; ++label) {
      const double cx = 4 + u(rng) * 16, cy = 4 + u(rng) * 12, cz = 3 + u(rng) * 10, r = 2.5 + u(rng) * 3 + seed_shift;
      for (int64_t k = 0; k < nz; ++k)
        for (int64_t j = 0; j < ny; ++j)
          for (int64_t i = 0; i < nx; ++i) {
            const double d = std::sqrt((i - cx) * (i - cx) + (j - cy) * (j - cy) + 1.5 * (k - cz) * (k - cz));
            if (d < r + 0.8 * std::sin(i * 0.9 + j * 0.7 + label)) m.data<int32_t>()[i + nx * (j + ny * k)] = label;
          }
    }
    return m;
  };
  NDArray a = blobs(0), b = blobs(1);
  auto surface = [&](const NDArray& m, int32_t l) {
    std::vector<int64_t> s;
    auto in = [&](int64_t i, int64_t j, int64_t k) {
      return i >= 0 && j >= 0 && k >= 0 && i < nx && j < ny && k < nz && m.data<int32_t>()[i + nx * (j + ny * k)] == l;
    };
    for (int64_t k = 0; k < nz; ++k)
      for (int64_t j = 0; j < ny; ++j)
        for (int64_t i = 0; i < nx; ++i)
          if (in(i, j, k) && (!in(i - 1, j, k) || !in(i + 1, j, k) || !in(i, j - 1, k) || !in(i, j + 1, k) ||
                              !in(i, j, k - 1) || !in(i, j, k + 1)))
            s.push_back(i + nx * (j + ny * k));
    return s;
  };
  auto directed = [&](const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
    std::vector<double> d;
    for (int64_t p : from) {
      double best = std::numeric_limits<double>::infinity();
      for (int64_t q : to) {
        const double dx = sp[0] * double(p % nx - q % nx), dy = sp[1] * double((p / nx) % ny - (q / nx) % ny),
                     dz = sp[2] * double(p / (nx * ny) - q / (nx * ny));
        best = std::min(best, dx * dx + dy * dy + dz * dz);
      }
      d.push_back(std::sqrt(best));
    }
    return d;
  };
  LabelMetricsOptions o;
  o.spacing_mm = sp;
  LabelMetrics m = ComputeLabelMetrics(a, b, o).value();
  int checked = 0;
  for (const LabelScore& s : m.labels) {
    if (s.voxels_a == 0 || s.voxels_b == 0) continue;
    const auto sa = surface(a, int32_t(s.label)), sb = surface(b, int32_t(s.label));
    auto dab = directed(sa, sb), dba = directed(sb, sa);
    const double hd95 = std::max(Percentile(dab, 95), Percentile(dba, 95));
    const double hd90 = std::max(Percentile(dab, 90), Percentile(dba, 90));
    const double hd100 = std::max(dab.back(), dba.back());
    SCOPED_TRACE(s.label);
    EXPECT_NEAR(s.hd95_mm, hd95, 1e-9);
    EXPECT_NEAR(s.hd90_mm, hd90, 1e-9);
    EXPECT_NEAR(s.hd100_mm, hd100, 1e-9);
    EXPECT_GT(hd95, 0.0);
    ++checked;
  }
  EXPECT_GE(checked, 2);
}

TEST(LabelMetrics, RejectsBadArguments) {
  NDArray a = Labels<int32_t>({4, 4, 4}), b = Labels<int32_t>({4, 4, 3});
  EXPECT_EQ(ComputeLabelMetrics(a, b).status().code(), absl::StatusCode::kInvalidArgument);
  NDArray f = NDArray::Allocate({4, 4, 4}, DType::kFloat32).value();
  EXPECT_EQ(ComputeLabelMetrics(a, f).status().code(), absl::StatusCode::kInvalidArgument);
  LabelMetricsOptions o;
  o.spacing_mm = {1, 0, 1};
  EXPECT_EQ(ComputeLabelMetrics(a, a, o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace registration
}  // namespace tessera
