// MCC descriptors (CPU reference): cell values against the paper's formula
// written independently with the C library, thresholding, validity rules,
// invariance to rigid motions, input checks and the gallery layout.
#include "kernels/fingerprint/mcc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/fingerprint/test_templates.h"

namespace tessera {
namespace fingerprint {
namespace {

using testing::TestTemplates;

bool Bit(const uint64_t* words, int bit) { return (words[bit / 64] >> (bit % 64)) & 1; }

// The cell sum of the paper, straight from the formulas (std::exp, std::erf,
// std::cos); NaN never - the caller only asks for valid cells.
double FormulaCellValue(const std::vector<MinutiaPoint>& pts, int center, int i, int j, int k, const MccParams& p) {
  const double two_pi = 2 * M_PI;
  auto dphi = [two_pi](double a, double b) {
    double d = a - b;
    while (d < -M_PI) d += two_pi;
    while (d >= M_PI) d -= two_pi;
    return d;
  };
  double theta = std::fmod(static_cast<double>(pts[center].theta), two_pi);
  if (theta < 0) theta += two_pi;
  theta = static_cast<float>(theta);
  const double ds = 2 * p.radius / kMccNs, dd = two_pi / kMccNd;
  const double di = (i + 1) - (kMccNs + 1) / 2.0, dj = (j + 1) - (kMccNs + 1) / 2.0;
  const double px = pts[center].x + ds * (std::cos(theta) * di + std::sin(theta) * dj);
  const double py = pts[center].y + ds * (-std::sin(theta) * di + std::cos(theta) * dj);
  const double phi_k = -M_PI + (k + 1 - 0.5) * dd;
  double sum = 0;
  for (size_t t = 0; t < pts.size(); ++t) {
    if (static_cast<int>(t) == center) continue;
    const double d = std::hypot(px - pts[t].x, py - pts[t].y);
    if (d > 3 * p.sigma_s) continue;
    double theta_t = std::fmod(static_cast<double>(pts[t].theta), two_pi);
    if (theta_t < 0) theta_t += two_pi;
    theta_t = static_cast<float>(theta_t);
    const double gs = std::exp(-d * d / (2 * p.sigma_s * p.sigma_s)) / (p.sigma_s * std::sqrt(two_pi));
    const double alpha = dphi(phi_k, dphi(theta, theta_t));
    const double s2 = p.sigma_d * std::sqrt(2.0);
    const double gd = 0.5 * (std::erf((alpha + dd / 2) / s2) - std::erf((alpha - dd / 2) / s2));
    sum += gs * gd;
  }
  return sum;
}

TEST(Mcc, CellsInCircle) {
  EXPECT_EQ(MccCellsInCircle(MccParams()), 208);
  uint64_t mask[kMccMaskWords];
  MccCircleMask(MccParams(), mask);
  int n = 0;
  for (uint64_t w : mask) n += __builtin_popcountll(w);
  EXPECT_EQ(n, 208);
}

TEST(Mcc, CellValuesFollowThePaper) {
  const MccParams p;
  const auto templates = TestTemplates(1, 3, 11);
  int checked = 0, valid_cells = 0;
  for (size_t t = 0; t < 3; ++t) {
    const auto& pts = templates[t * 13 % templates.size()];
    const MccTemplate mcc = cpu::BuildMccTemplate(pts, p);
    for (const MccCylinder& cyl : mcc.cylinders) {
      for (int j = 0; j < kMccNs; ++j) {
        for (int i = 0; i < kMccNs; ++i) {
          const int bit = i + kMccNs * j;
          const double v0 = cpu::MccCellValue(pts, cyl.minutia, i, j, 0, p);
          EXPECT_EQ(Bit(cyl.mask, bit), v0 >= 0) << "cell " << i << "," << j;
          if (v0 < 0) continue;
          ++valid_cells;
          for (int k = 0; k < kMccNd; ++k) {
            const double v = cpu::MccCellValue(pts, cyl.minutia, i, j, k, p);
            const double want = FormulaCellValue(pts, cyl.minutia, i, j, k, p);
            ASSERT_NEAR(v, want, 1e-12 + 1e-10 * want) << "minutia " << cyl.minutia << " cell " << i << "," << j << "," << k;
            EXPECT_EQ(Bit(cyl.bits + k * kMccLayerWords, bit), v >= p.mu_psi);
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 10000);
  std::printf("%d cell values (%d valid cells) match the formula\n", checked, valid_cells);
}

TEST(Mcc, ValidityRules) {
  const MccParams p;
  // One minutia, or two: fewer than minM = 2 neighbours.
  EXPECT_TRUE(cpu::BuildMccTemplate({{100, 100, 0}}, p).cylinders.empty());
  EXPECT_TRUE(cpu::BuildMccTemplate({{100, 100, 0}, {130, 100, 1}}, p).cylinders.empty());
  // Three close minutiae: enough neighbours, but the hull (a small triangle
  // grown by 50 px) covers too few of the 208 cells (minVC = 75%).
  EXPECT_TRUE(cpu::BuildMccTemplate({{100, 100, 0}, {110, 100, 1}, {105, 110, 2}}, p).cylinders.empty());
  // A grid of minutiae over a 300 x 400 area. With omega = 50 even a corner
  // cylinder keeps ~83% of its cells (each hull edge, 50 px away once grown,
  // cuts off a 20 px segment of the 70 px circle), so it is valid; without
  // the enlargement a corner keeps a quarter and an edge half: invalid.
  std::vector<MinutiaPoint> grid;
  for (int y = 0; y <= 400; y += 25)
    for (int x = 0; x <= 300; x += 25) grid.push_back({static_cast<float>(x), static_cast<float>(y), 0.3f});
  auto validity = [&grid](const MccParams& params) {
    std::vector<bool> valid(grid.size(), false);
    for (const MccCylinder& c : cpu::BuildMccTemplate(grid, params).cylinders) valid[c.minutia] = true;
    return valid;
  };
  auto at = [](int x, int y) { return static_cast<size_t>((y / 25) * 13 + x / 25); };
  const std::vector<bool> valid = validity(p);
  EXPECT_TRUE(valid[at(150, 200)]);
  EXPECT_TRUE(valid[at(0, 0)]);
  MccParams tight = p;
  tight.omega = 0;
  const std::vector<bool> valid_tight = validity(tight);
  EXPECT_TRUE(valid_tight[at(150, 200)]);
  EXPECT_FALSE(valid_tight[at(0, 0)]);
  EXPECT_FALSE(valid_tight[at(300, 400)]);
  EXPECT_FALSE(valid_tight[at(0, 200)]);
  EXPECT_TRUE(valid_tight[at(75, 200)]);  // 75 px from the edge: the whole circle is inside
  const MccTemplate mcc = cpu::BuildMccTemplate(grid, p);
  // Cells outside the circle are never valid.
  uint64_t circle[kMccMaskWords];
  MccCircleMask(p, circle);
  for (const MccCylinder& c : mcc.cylinders)
    for (int w = 0; w < kMccMaskWords; ++w) EXPECT_EQ(c.mask[w] & ~circle[w], 0u);
  // A larger omega validates more cylinders, minM = 0 and minVC = 0 all.
  MccParams loose = p;
  loose.min_neighbours = 0;
  loose.min_valid_cells = 0;
  EXPECT_EQ(cpu::BuildMccTemplate(grid, loose).cylinders.size(), grid.size());
}

// Rotating the image by 90 degrees counterclockwise (x, y) -> (y, W - x),
// theta -> theta + pi/2 maps each cylinder onto itself; only floating-point
// rounding of the cell centres can flip a bit.
TEST(Mcc, InvariantToRigidMotion) {
  const MccParams p;
  const auto templates = TestTemplates(2, 5, 12);
  long long same = 0, total = 0;
  for (size_t t = 0; t < 5; ++t) {
    const auto& pts = templates[t * 7 % templates.size()];
    std::vector<MinutiaPoint> rotated;
    for (const MinutiaPoint& m : pts) rotated.push_back({m.y + 17.0f, 500.0f - m.x, m.theta + 1.57079633f});
    const MccTemplate a = cpu::BuildMccTemplate(pts, p), b = cpu::BuildMccTemplate(rotated, p);
    ASSERT_EQ(a.cylinders.size(), b.cylinders.size());
    for (size_t i = 0; i < a.cylinders.size(); ++i) {
      ASSERT_EQ(a.cylinders[i].minutia, b.cylinders[i].minutia);
      for (int w = 0; w < kMccBitWords; ++w) {
        same += 64 - __builtin_popcountll(a.cylinders[i].bits[w] ^ b.cylinders[i].bits[w]);
        total += 64;
      }
      for (int w = 0; w < kMccMaskWords; ++w) EXPECT_EQ(a.cylinders[i].mask[w], b.cylinders[i].mask[w]);
    }
  }
  std::printf("%lld of %lld bits identical after a 90-degree rotation\n", same, total);
  EXPECT_GE(static_cast<double>(same) / total, 0.9999);
}

TEST(Mcc, RejectsBadInput) {
  std::vector<MinutiaPoint> many(256, MinutiaPoint{1, 1, 0});
  EXPECT_EQ(BuildMccTemplates(Stream::Cpu(), {many}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildMccTemplates(Stream::Cpu(), {{{NAN, 1, 0}}}).status().code(), absl::StatusCode::kInvalidArgument);
  MccParams bad;
  bad.radius = -1;
  EXPECT_EQ(BuildMccTemplates(Stream::Cpu(), {{{1, 1, 0}}}, bad).status().code(), absl::StatusCode::kInvalidArgument);
  auto empty = BuildMccTemplates(Stream::Cpu(), {{}});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE((*empty)[0].cylinders.empty());
  // Angles outside [0, 2 pi) are wrapped.
  auto wrapped = cpu::BuildMccTemplate({{100, 100, -1.0f}, {110, 100, 7.0f}, {105, 110, 2.0f}});
  (void)wrapped;
}

TEST(MccGallery, LayoutRoundTrip) {
  const auto templates = TestTemplates(3, 10, 13);
  MccGallery g;
  std::vector<MccTemplate> built;
  for (size_t t = 0; t < 10; ++t) {
    built.push_back(cpu::BuildMccTemplate(templates[t]));
    g.Append(built.back());
  }
  ASSERT_EQ(g.num_templates(), 10);
  uint64_t circle[kMccMaskWords];
  MccCircleMask(MccParams(), circle);
  for (int t = 0; t < 10; ++t) {
    const MccTemplate back = g.Get(t);
    ASSERT_EQ(back.cylinders.size(), built[t].cylinders.size());
    for (size_t j = 0; j < back.cylinders.size(); ++j) {
      const MccCylinder &x = back.cylinders[j], &y = built[t].cylinders[j];
      int bits = 0;
      bool full = true;
      for (int w = 0; w < kMccBitWords; ++w) {
        EXPECT_EQ(x.bits[w], y.bits[w]);
        bits += __builtin_popcountll(y.bits[w]);
      }
      for (int w = 0; w < kMccMaskWords; ++w) {
        EXPECT_EQ(x.mask[w], y.mask[w]);
        full = full && y.mask[w] == circle[w];
      }
      EXPECT_EQ(x.x, y.x);
      EXPECT_EQ(x.theta, y.theta);
      EXPECT_EQ(g.bit_count[g.start[t] + j], bits);
      EXPECT_EQ(g.full_mask[g.start[t] + j], full ? 1 : 0);
    }
  }
  // Word w of cylinder j of template t sits at bits[24 * start[t] + w * n_t + j].
  const int t = 4, n = g.template_size(4);
  EXPECT_EQ(g.bits[24 * g.start[t] + 5 * n + 2], built[t].cylinders[2].bits[5]);
}

TEST(Mcc, CudaStreamWithoutCudaIsAnError) {
  if (DeviceRegistry::Get().cuda_available()) GTEST_SKIP() << "a GPU is present";
  EXPECT_FALSE(Stream::Create(Backend::kCuda).ok());
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
