// CPU batch update and box blur against direct references.
#include "kernels/som/batch_update.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/som/documents.h"
#include "kernels/som/test_util.h"

namespace tessera {
namespace som {
namespace {

using testutil::HostCodebook;
using testutil::HostDocs;

TEST(BoxBlur, HalfWidthFromRadius) {
  EXPECT_EQ(BoxBlurForRadius(0.0).half_width, 0);
  EXPECT_EQ(BoxBlurForRadius(0.5).half_width, 0);
  EXPECT_DOUBLE_EQ(BoxBlurForRadius(0.5).side_weight, std::exp(-2.0));  // 3-tap below a box
  EXPECT_EQ(BoxBlurForRadius(0.2).side_weight, 0.0);                    // identity
  EXPECT_EQ(BoxBlurForRadius(1.0).side_weight, 0.0);
  for (double r : {0.5, 0.7, 0.85}) {  // a sampled Gaussian is a little narrower
    EXPECT_NEAR(EffectiveSigma(BoxBlurForRadius(r)), r, 0.15) << r;
  }
  EXPECT_EQ(BoxBlurForRadius(1.0).half_width, 1);
  EXPECT_EQ(BoxBlurForRadius(10.0).half_width, 10);  // (sqrt(401) - 1) / 2 = 9.51
  for (double r : {2.0, 5.0, 16.0, 100.0}) {
    // One step of b changes the effective sigma by about sqrt(k / 3) = 1.
    EXPECT_NEAR(EffectiveSigma(BoxBlurForRadius(r)), r, 0.6) << r;
  }
  EXPECT_EQ(BoxBlurForRadius(3.0, 1).passes, 1);
}

std::vector<float> RandomPlane(const GridShape& g, std::mt19937& rng, bool integers) {
  std::vector<float> p(g.nodes());
  std::uniform_real_distribution<float> u(0.0f, 10.0f);
  std::uniform_int_distribution<int> k(0, 5);
  for (float& x : p) x = integers ? static_cast<float>(k(rng) * k(rng) * k(rng)) : u(rng);
  return p;
}

TEST(BoxBlurCpu, RunningSumsMatchDirectWindowSums) {
  std::mt19937 rng(1);
  for (Topology topo : {Topology::kPlanar, Topology::kToroidal}) {
    for (auto [w, h] : std::vector<std::pair<int, int>>{{1, 1}, {1, 9}, {7, 1}, {5, 6}, {16, 16}, {33, 20}}) {
      for (int b : {-1, 0, 1, 2, 4, 9, 40}) {  // -1: the 3-tap kernel
        for (int passes : {1, 3}) {
          const GridShape g{w, h, topo};
          const BoxBlur blur = b < 0 ? BoxBlur{0, passes, 0.3} : BoxBlur{b, passes};
          SCOPED_TRACE(testing::Message() << GridToString(g) << " b=" << b << " k=" << passes);
          for (bool integers : {true, false}) {
            std::vector<float> plane = RandomPlane(g, rng, integers), ref(g.nodes());
            cpu::BoxBlurPlaneDirect(plane.data(), ref.data(), g, blur);
            cpu::BlurScratch scratch;
            cpu::BoxBlurPlane(plane.data(), g, blur, scratch);
            for (int64_t i = 0; i < g.nodes(); ++i) {
              if (integers) {
                ASSERT_EQ(plane[i], ref[i]) << i;  // exact in double
              } else {
                ASSERT_NEAR(plane[i], ref[i], 1e-5 * std::abs(ref[i])) << i;
              }
            }
          }
        }
      }
    }
  }
}

// The 3-tap kernel against its definition with explicit weights.
TEST(BoxBlurCpu, ThreeTapIsTheSampledGaussian) {
  const GridShape g{5, 4, Topology::kPlanar};
  const double a = std::exp(-2.0);
  std::vector<float> plane(20, 0.0f);
  plane[7] = 1.0f;  // (2, 1)
  cpu::BlurScratch scratch;
  cpu::BoxBlurPlane(plane.data(), g, BoxBlurForRadius(0.5), scratch);
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 5; ++x) {
      const int dx = std::abs(x - 2), dy = std::abs(y - 1);
      const double wx = dx == 0 ? 1 : dx == 1 ? a : 0, wy = dy == 0 ? 1 : dy == 1 ? a : 0;
      EXPECT_NEAR(plane[x + 5 * y], wx * wy, 1e-7) << x << "," << y;
    }
  }
}

TEST(BoxBlurCpu, ToroidalBlurScalesMassExactly) {
  std::mt19937 rng(2);
  const GridShape torus{12, 9, Topology::kToroidal};
  std::vector<float> plane(torus.nodes());
  cpu::BlurScratch scratch;
  for (float& x : plane) x = static_cast<float>(rng() % 4);
  double before = 0, after = 0;
  for (float x : plane) before += x;
  cpu::BoxBlurPlane(plane.data(), torus, BoxBlur{2, 3}, scratch);
  for (float x : plane) after += x;
  EXPECT_EQ(after, before * std::pow(5.0, 6));  // < 2^24 per cell: exact  // each 1-D box multiplies the mass by 2b+1
}

// The naive batch update: dense per-node sums, direct blur, division.
void ReferenceUpdate(const HostDocs& docs, const std::vector<int32_t>& bmu, const GridShape& g, const BoxBlur& blur,
                     HostCodebook& cb) {
  const int64_t m = g.nodes();
  std::vector<float> counts(m, 0), bcounts(m);
  for (int32_t b : bmu) counts[b] += 1;
  cpu::BoxBlurPlaneDirect(counts.data(), bcounts.data(), g, blur);
  std::vector<float> plane(m), bplane(m);
  for (int64_t v = 0; v < cb.features; ++v) {
    std::fill(plane.begin(), plane.end(), 0.0f);
    for (int64_t d = 0; d < docs.rows(); ++d) {
      for (int64_t k = docs.offsets[d]; k < docs.offsets[d + 1]; ++k) {
        if (docs.indices[k] == v) plane[bmu[d]] += 1;
      }
    }
    cpu::BoxBlurPlaneDirect(plane.data(), bplane.data(), g, blur);
    for (int64_t i = 0; i < m; ++i) {
      if (bcounts[i] > 0) {
        const float w = bplane[i] / bcounts[i];
        if (cb.type == WeightType::kFloat32) {
          cb.f32[v * m + i] = w;
        } else {
          cb.f16[v * m + i] = FloatToHalf(w);
        }
      }
    }
  }
  cb.UpdateNorms();
}

TEST(BatchUpdateCpu, MatchesNaiveReference) {
  std::mt19937 rng(3);
  for (Topology topo : {Topology::kPlanar, Topology::kToroidal}) {
    for (int b : {-1, 0, 1, 3}) {  // -1: the 3-tap kernel
      for (WeightType type : {WeightType::kFloat32, WeightType::kFloat16}) {
        const GridShape g{9, 7, topo};
        const BoxBlur blur = b < 0 ? BoxBlurForRadius(0.6) : BoxBlur{b, 3};
        SCOPED_TRACE(testing::Message() << GridToString(g) << " b=" << b << " " << WeightTypeName(type));
        HostDocs docs = testutil::RandomDocs(120, 40, 8, rng);
        HostCodebook cb = testutil::RandomCodebook(g.nodes(), 40, rng);
        if (type == WeightType::kFloat16) cb = testutil::ToHalf(cb);
        // BMUs that leave some nodes without documents.
        std::vector<int32_t> bmu(docs.rows());
        std::uniform_int_distribution<int> node(0, static_cast<int>(g.nodes()) / 2);
        for (int32_t& x : bmu) x = node(rng);
        HostCodebook ref = cb;
        ReferenceUpdate(docs, bmu, g, blur, ref);
        HostCsc csc = BuildCsc(docs.view());
        ASSERT_TRUE(BatchUpdate(Stream::Cpu(), csc.view(docs.rows()), bmu.data(), g, blur, cb.view()).ok());
        if (type == WeightType::kFloat32) {
          ASSERT_EQ(cb.f32, ref.f32);  // integer-valued box sums are exact; the 3-tap arithmetic is identical
        } else {
          ASSERT_EQ(cb.f16, ref.f16);
        }
        ASSERT_EQ(cb.norms, ref.norms);
      }
    }
  }
}

TEST(BatchUpdateCpu, ZeroRadiusIsTheMeanOfAssignedDocsAndEmptyNodesKeepWeights) {
  std::mt19937 rng(4);
  const GridShape g{4, 4, Topology::kPlanar};
  HostDocs docs = testutil::RandomDocs(30, 10, 6, rng);
  HostCodebook cb = testutil::RandomCodebook(16, 10, rng);
  const HostCodebook before = cb;
  std::vector<int32_t> bmu(docs.rows());
  for (int64_t d = 0; d < docs.rows(); ++d) bmu[d] = d % 2 == 0 ? 3 : 9;
  HostCsc csc = BuildCsc(docs.view());
  ASSERT_TRUE(BatchUpdate(Stream::Cpu(), csc.view(docs.rows()), bmu.data(), g, BoxBlur{0, 3}, cb.view()).ok());
  for (int64_t i = 0; i < 16; ++i) {
    for (int64_t v = 0; v < 10; ++v) {
      if (i != 3 && i != 9) {
        EXPECT_EQ(cb.f32[v * 16 + i], before.f32[v * 16 + i]);
        continue;
      }
      int hits = 0, with = 0;
      for (int64_t d = 0; d < docs.rows(); ++d) {
        if (bmu[d] != i) continue;
        ++hits;
        for (int64_t k = docs.offsets[d]; k < docs.offsets[d + 1]; ++k) with += docs.indices[k] == v;
      }
      EXPECT_FLOAT_EQ(cb.f32[v * 16 + i], static_cast<float>(with) / hits);
    }
  }
}

TEST(BatchUpdateCpu, RejectsBadArguments) {
  std::mt19937 rng(5);
  HostDocs docs = testutil::RandomDocs(5, 10, 3, rng);
  HostCodebook cb = testutil::RandomCodebook(16, 10, rng);
  HostCsc csc = BuildCsc(docs.view());
  std::vector<int32_t> bmu(5, 0);
  EXPECT_FALSE(BatchUpdate(Stream::Cpu(), csc.view(5), bmu.data(), GridShape{5, 3}, BoxBlur{}, cb.view()).ok());
  HostCodebook nm = testutil::WithLayout(cb, CodebookLayout::kNodeMajor);
  EXPECT_FALSE(BatchUpdate(Stream::Cpu(), csc.view(5), bmu.data(), GridShape{4, 4}, BoxBlur{}, nm.view()).ok());
  EXPECT_FALSE(BatchUpdate(Stream::Cpu(), csc.view(5), bmu.data(), GridShape{0, 4}, BoxBlur{}, cb.view()).ok());
  EXPECT_TRUE(BatchUpdate(Stream::Cpu(), csc.view(5), bmu.data(), GridShape{4, 4}, BoxBlur{}, cb.view()).ok());
}

}  // namespace
}  // namespace som
}  // namespace tessera
