// DMC kernels 2-4 on the CPU against plain references written from the
// definitions in dmc.h (full scans, double precision, the library's cos/sin).
#include "kernels/fingerprint/dmc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>
#include <vector>

#include "kernels/fingerprint/dmc_impl.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/test_templates.h"

namespace tessera {
namespace fingerprint {
namespace {

struct Fixture {
  std::vector<MccTemplate> templates;
  MccGallery gallery;
};

Fixture Build(const std::vector<std::vector<MinutiaPoint>>& points) {
  Fixture f;
  for (const auto& p : points) {
    f.templates.push_back(cpu::BuildMccTemplate(p));
    f.gallery.Append(f.templates.back());
  }
  return f;
}

struct Outputs {
  std::vector<int16_t> best;
  std::vector<float> sim, quality;
  std::vector<uint8_t> count, members;
  explicit Outputs(int n)
      : best(n, -7), sim(n, -7), quality(n, -7), count(n, 99), members(static_cast<size_t>(n) * kDmcMaxClusterSize) {}
  DmcKernelResults view() {
    return DmcKernelResults{best.data(), sim.data(), quality.data(), count.data(), members.data()};
  }
};

TEST(DmcTest, CosSinMatchesTheLibrary) {
  for (float x = -7.0f; x <= 7.0f; x += 0.001f) {
    float c, s;
    dmc_internal::CosSinF(x, &c, &s);
    ASSERT_NEAR(c, std::cos(static_cast<double>(x)), 2e-7) << x;
    ASSERT_NEAR(s, std::sin(static_cast<double>(x)), 2e-7) << x;
  }
}

TEST(DmcTest, LookupTableHoldsEveryMatchableLatentMinutia) {
  const DmcConstants c = *MakeDmcConstants(DmcParams{});
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> angle(0.0f, 6.2831853f);
  MccTemplate latent;
  for (int i = 0; i < 200; ++i) {
    MccCylinder cyl{};
    cyl.theta = angle(rng);
    latent.cylinders.push_back(cyl);
  }
  const DmcLatent l = *PrepareDmcLatent(latent, c);
  for (int trial = 0; trial < 20000; ++trial) {
    const float g = trial < 256 ? trial * (6.2831853f / 256) : angle(rng);  // bin edges too
    const int bin = dmc_internal::DirectionBin(g);
    std::set<int> listed(l.lut_index.begin() + l.lut_offset[bin], l.lut_index.begin() + l.lut_offset[bin + 1]);
    for (int i = 0; i < 200; ++i) {
      if (std::fabs(fpmath::AngleDiffF(l.theta[i], g)) <= c.delta_theta) {
        ASSERT_TRUE(listed.count(i)) << "theta " << g << " latent " << l.theta[i];
      }
    }
  }
}

// Kernel 2 against the scan over all latent cylinders with lss.h's local
// similarity: identical indices and values.
void CheckLocalMatching(const std::vector<std::vector<MinutiaPoint>>& points) {
  const Fixture f = Build(points);
  DmcParams params;
  const DmcConstants c = *MakeDmcConstants(params);
  LssParams lp;
  lp.delta_theta = params.delta_theta;
  const LssConstants lc = MakeLssConstants(lp);
  std::vector<int32_t> start;
  const DmcBatchView batch = HostBatchView(f.gallery, 0, f.gallery.num_templates(), &start);
  int matched = 0;
  for (int p = 0; p < 6; ++p) {
    const DmcLatent latent = *PrepareDmcLatent(f.templates[p], c);
    Outputs out(batch.num_cylinders);
    cpu::LocalMatching(latent.view(), batch, c, out.best.data(), out.sim.data());
    for (int t = 0; t < f.gallery.num_templates(); ++t) {
      const MccTemplate g = f.gallery.Get(t);
      for (int j = 0; j < static_cast<int>(g.cylinders.size()); ++j) {
        int best = -1;
        float best_v = params.min_similarity;
        for (int l = 0; l < latent.n(); ++l) {
          const float v = cpu::LocalSimilarity(f.templates[p].cylinders[l], g.cylinders[j], lc);
          if (v > best_v) {
            best_v = v;
            best = l;
          }
        }
        const int i = start[t] + j;
        ASSERT_EQ(out.best[i], best) << "latent " << p << " template " << t << " cylinder " << j;
        ASSERT_EQ(out.sim[i], best < 0 ? 0.0f : best_v);
        matched += best >= 0;
      }
    }
  }
  EXPECT_GT(matched, 100);
}

TEST(DmcTest, LocalMatchingEqualsTheFullScanOnSyntheticTemplates) {
  CheckLocalMatching(testing::SyntheticTemplates(30, 11));
}

TEST(DmcTest, LocalMatchingEqualsTheFullScanOnRealTemplates) {
  auto real = testing::RealTemplates(3);
  if (real.empty()) GTEST_SKIP() << "FVC2002 data not found";
  real.resize(30);
  CheckLocalMatching(real);
}

// Kernel 3 from the definition, in double precision.
double PlainQuality(const MccTemplate& t, int i, const DmcParams& p) {
  double sc = 0, sw = 0;
  const auto& c = t.cylinders;
  for (size_t j = 0; j < c.size(); ++j) {
    if (static_cast<int>(j) == i) continue;
    const double d2 = std::pow(c[j].x - c[i].x, 2) + std::pow(c[j].y - c[i].y, 2);
    if (d2 > p.quality_radius * p.quality_radius) continue;
    const double w = std::exp(-d2 / (2.0 * p.quality_sigma * p.quality_sigma));
    sc += w * std::cos(2.0 * (c[j].theta - c[i].theta));
    sw += w;
  }
  return std::min(1.0, std::max(0.0, 0.5 + 0.5 * sc / (sw + p.quality_prior)));
}

TEST(DmcTest, QualityFollowsItsDefinition) {
  auto points = testing::TestTemplates(2, 30, 5);
  points.resize(30);
  const Fixture f = Build(points);
  DmcParams params;
  const DmcConstants c = *MakeDmcConstants(params);
  std::vector<int32_t> start;
  const DmcBatchView batch = HostBatchView(f.gallery, 0, f.gallery.num_templates(), &start);
  std::vector<float> q(batch.num_cylinders);
  cpu::MinutiaQuality(batch, c, q.data());
  double lo = 1, hi = 0;
  for (int t = 0; t < f.gallery.num_templates(); ++t) {
    const MccTemplate g = f.gallery.Get(t);
    for (int j = 0; j < static_cast<int>(g.cylinders.size()); ++j) {
      ASSERT_NEAR(q[start[t] + j], PlainQuality(g, j, params), 2e-6);
      lo = std::min<double>(lo, q[start[t] + j]);
      hi = std::max<double>(hi, q[start[t] + j]);
    }
  }
  EXPECT_LT(lo, 0.45);  // the definition spreads values, not a constant
  EXPECT_GT(hi, 0.8);
  // The latent's qualities use the same definition.
  const DmcLatent latent = *PrepareDmcLatent(f.templates[0], c);
  for (int l = 0; l < latent.n(); ++l) ASSERT_NEAR(latent.quality[l], PlainQuality(f.templates[0], l, params), 2e-6);
}

TEST(DmcTest, QualityIsHighInAConsistentFlowAndLowAcrossIt) {
  // A grid of parallel minutiae and one across the flow in its middle.
  std::vector<float> x, y, th;
  for (int a = 0; a < 5; ++a)
    for (int b = 0; b < 5; ++b) {
      x.push_back(100 + 20 * a);
      y.push_back(100 + 20 * b);
      th.push_back((a + b) % 2 ? 0.3f : 0.3f + 3.14159265f);  // orientation mod pi is what counts
    }
  th[12] = 0.3f + 1.5707963f;
  const DmcConstants c = *MakeDmcConstants(DmcParams{});
  std::vector<float> q(x.size());
  cpu::TemplateQuality(static_cast<int>(x.size()), x.data(), y.data(), th.data(), c, q.data());
  EXPECT_LT(q[12], 0.2f);
  EXPECT_GT(q[6], 0.75f);
}

// Kernel 4 from the definition in double precision: a member decision that is
// not within 1e-3 of a threshold must agree.
TEST(DmcTest, ClustersFollowTheirDefinition) {
  auto points = testing::TestTemplates(1, 30, 9);
  points.resize(30);
  const Fixture f = Build(points);
  DmcParams params;
  const DmcConstants c = *MakeDmcConstants(params);
  std::vector<int32_t> start;
  const DmcBatchView batch = HostBatchView(f.gallery, 0, f.gallery.num_templates(), &start);
  int clusters = 0, big = 0;
  for (int p = 0; p < 4; ++p) {
    const DmcLatent latent = *PrepareDmcLatent(f.templates[p], c);
    Outputs out(batch.num_cylinders);
    cpu::RunDmcKernels(latent.view(), batch, c, out.view(), 1);
    for (int t = 0; t < batch.num_templates; ++t) {
      const int s = start[t], e = start[t + 1];
      for (int i = s; i < e; ++i) {
        const int l = out.best[i];
        if (l < 0) {
          ASSERT_EQ(out.count[i], 0);
          continue;
        }
        ++clusters;
        ASSERT_GE(out.count[i], 1);
        ASSERT_EQ(out.members[i], i - s) << "the centre comes first";
        std::vector<int> got;
        for (int m = 1; m < out.count[i]; ++m) got.push_back(s + out.members[static_cast<size_t>(m) * batch.num_cylinders + i]);
        big += out.count[i] >= 3;
        const double a = std::remainder(static_cast<double>(batch.theta[i]) - latent.theta[l], 2 * M_PI);
        size_t next = 0;
        int accepted = 0;
        for (int k = s; k < e; ++k) {
          const int lk = out.best[k];
          if (k == i || lk < 0 || lk == l) {
            ASSERT_TRUE(next >= got.size() || got[next] != k);
            continue;
          }
          const double dx = latent.x[lk] - latent.x[l], dy = latent.y[lk] - latent.y[l];
          const double px = batch.x[i] + dx * std::cos(a) + dy * std::sin(a);
          const double py = batch.y[i] - dx * std::sin(a) + dy * std::cos(a);
          const double e1 = std::hypot(px - batch.x[k], py - batch.y[k]) - params.cluster_distance;
          const double e2 = std::fabs(std::remainder(latent.theta[lk] + a - batch.theta[k], 2 * M_PI)) -
                            params.cluster_angle;
          const double e3 = std::hypot(batch.x[k] - batch.x[i], batch.y[k] - batch.y[i]) - params.cluster_radius;
          const bool in = next < got.size() && got[next] == k;
          if (in) ++next;
          const bool clear_in = e1 < -1e-3 && e2 < -1e-3 && e3 < -1e-3;
          const bool clear_out = e1 > 1e-3 || e2 > 1e-3 || e3 > 1e-3;
          if (clear_in && accepted + 1 < kDmcMaxClusterSize) ASSERT_TRUE(in) << "k " << k << " of cluster " << i;
          if (clear_out) ASSERT_FALSE(in) << "k " << k << " of cluster " << i;
          accepted += in;
        }
        ASSERT_EQ(next, got.size()) << "members ascending";
      }
    }
  }
  EXPECT_GT(clusters, 100);
  EXPECT_GT(big, 10);
}

TEST(DmcTest, ThreadedRunEqualsSingleThreaded) {
  const Fixture f = Build(testing::SyntheticTemplates(40, 17));
  const DmcConstants c = *MakeDmcConstants(DmcParams{});
  std::vector<int32_t> start;
  const DmcBatchView batch = HostBatchView(f.gallery, 5, 35, &start);
  const DmcLatent latent = *PrepareDmcLatent(f.templates[0], c);
  Outputs a(batch.num_cylinders), b(batch.num_cylinders);
  cpu::RunDmcKernels(latent.view(), batch, c, a.view(), 1);
  cpu::RunDmcKernels(latent.view(), batch, c, b.view(), 0);
  EXPECT_EQ(a.best, b.best);
  EXPECT_EQ(a.sim, b.sim);
  EXPECT_EQ(a.quality, b.quality);
  EXPECT_EQ(a.count, b.count);
  // And RunDmcKernelsOnGallery on the CPU stream gives the same.
  Outputs d(batch.num_cylinders);
  ASSERT_TRUE(RunDmcKernelsOnGallery(Stream::Cpu(), latent, f.gallery, 5, 35, c, d.view()).ok());
  EXPECT_EQ(a.best, d.best);
  EXPECT_EQ(a.count, d.count);
}

TEST(DmcTest, ResultsBlockIsCarvedWithoutOverlap) {
  for (int n : {0, 1, 7, 1000}) {
    std::vector<uint8_t> block(DmcResultsBytes(n) + 16);
    void* base = reinterpret_cast<void*>((reinterpret_cast<uintptr_t>(block.data()) + 15) & ~uintptr_t{15});
    const DmcKernelResults r = DmcResultsAt(base, n);
    const auto end = reinterpret_cast<uint8_t*>(base) + DmcResultsBytes(n);
    EXPECT_LE(reinterpret_cast<uint8_t*>(r.best_latent + n), reinterpret_cast<uint8_t*>(r.similarity));
    EXPECT_LE(reinterpret_cast<uint8_t*>(r.similarity + n), reinterpret_cast<uint8_t*>(r.quality));
    EXPECT_LE(reinterpret_cast<uint8_t*>(r.quality + n), r.cluster_count);
    EXPECT_LE(r.cluster_count + n, r.cluster_members);
    EXPECT_LE(r.cluster_members + static_cast<size_t>(n) * kDmcMaxClusterSize, end);
  }
}

TEST(DmcTest, BadInputIsRejected) {
  DmcParams bad;
  bad.cluster_distance = -1;
  EXPECT_FALSE(MakeDmcConstants(bad).ok());
  bad = DmcParams{};
  bad.delta_theta = NAN;
  EXPECT_FALSE(MakeDmcConstants(bad).ok());
  const DmcConstants c = *MakeDmcConstants(DmcParams{});
  MccTemplate huge;
  huge.cylinders.resize(256);
  EXPECT_EQ(PrepareDmcLatent(huge, c).status().code(), absl::StatusCode::kInvalidArgument);
  MccTemplate nan_latent;
  nan_latent.cylinders.resize(1);
  nan_latent.cylinders[0].x = NAN;
  EXPECT_FALSE(PrepareDmcLatent(nan_latent, c).ok());

  const Fixture f = Build(testing::SyntheticTemplates(3, 2));
  const DmcLatent latent = *PrepareDmcLatent(f.templates[0], c);
  std::vector<int32_t> start;
  DmcBatchView batch = HostBatchView(f.gallery, 0, 3, &start);
  EXPECT_TRUE(ValidateDmcBatch(latent.view(), batch).ok());
  start[3] += 1;  // table disagrees with the cylinder count
  EXPECT_FALSE(ValidateDmcBatch(latent.view(), batch).ok());
  Outputs out(f.gallery.num_cylinders());
  EXPECT_FALSE(RunDmcKernelsOnGallery(Stream::Cpu(), latent, f.gallery, 2, 5, c, out.view()).ok());
  // The device entry point refuses without a GPU (or bad sizes anywhere).
  EXPECT_FALSE(EnqueueDmcKernels(nullptr, latent.view(), batch, 300, c, out.view()).ok());
  if (!DeviceRegistry::Get().cuda_available()) {
    start[3] -= 1;
    EXPECT_FALSE(EnqueueDmcKernels(nullptr, latent.view(), batch, 60, c, out.view()).ok());
  }
}

TEST(DmcTest, EmptyLatentMatchesNothing) {
  const Fixture f = Build(testing::SyntheticTemplates(4, 21));
  const DmcConstants c = *MakeDmcConstants(DmcParams{});
  const DmcLatent latent = *PrepareDmcLatent(MccTemplate{}, c);
  Outputs out(f.gallery.num_cylinders());
  ASSERT_TRUE(RunDmcKernelsOnGallery(Stream::Cpu(), latent, f.gallery, 0, 4, c, out.view()).ok());
  for (int i = 0; i < f.gallery.num_cylinders(); ++i) {
    EXPECT_EQ(out.best[i], -1);
    EXPECT_EQ(out.count[i], 0);
  }
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
