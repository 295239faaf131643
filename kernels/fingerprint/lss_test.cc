// LSS / LSS-R on the CPU: local similarity against a bit-by-bit evaluation
// of the formula, the optimized matcher (both popcount paths, vectorized
// relaxation) against the plain reference bit for bit, the n_P table, the
// LSS-R pairs behind a score, and genuine/impostor separation on real
// templates.
#include "kernels/fingerprint/lss.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/fingerprint/fp_math.h"
#include "kernels/fingerprint/test_templates.h"

namespace tessera {
namespace fingerprint {
namespace {

using testing::TestTemplates;

bool Bit(const uint64_t* w, int i) { return (w[i / 64] >> (i % 64)) & 1; }

// 1 - ||ca xor cb|| / (||ca|| + ||cb||) over the cells valid in both, by
// looking at every cell; 0 when not matchable.
double BruteLambda(const MccCylinder& a, const MccCylinder& b, int min_common) {
  // Directions exactly 90 degrees (64 ISO units) apart are matchable: the
  // kernels allow 1e-5 rad of slack over pi/2.
  double d = std::fabs(std::remainder(static_cast<double>(a.theta) - b.theta, 2 * M_PI));
  if (d > M_PI / 2 + 1e-5) return 0;
  int common = 0;
  for (int c = 0; c < kMccCellsPerLayer; ++c) common += Bit(a.mask, c) && Bit(b.mask, c);
  if (common < min_common) return 0;
  int na = 0, nb = 0, nx = 0;
  for (int k = 0; k < kMccNd; ++k) {
    for (int c = 0; c < kMccCellsPerLayer; ++c) {
      if (!(Bit(a.mask, c) && Bit(b.mask, c))) continue;
      const bool x = Bit(a.bits + k * kMccLayerWords, c), y = Bit(b.bits + k * kMccLayerWords, c);
      na += x;
      nb += y;
      nx += x != y;
    }
  }
  if (na + nb == 0) return 0;
  return 1 - std::sqrt(nx) / (std::sqrt(na) + std::sqrt(nb));
}

std::vector<MccTemplate> Build(const std::vector<std::vector<MinutiaPoint>>& pts) {
  std::vector<MccTemplate> out;
  for (const auto& p : pts) out.push_back(cpu::BuildMccTemplate(p));
  return out;
}

TEST(Lss, Constants) {
  const LssConstants c = MakeLssConstants(LssParams());
  EXPECT_EQ(c.min_common_cells, 125);  // ceil(0.6 * 208)
  EXPECT_EQ(c.np_table[0], 4);
  EXPECT_EQ(c.np_table[20], 8);  // Z = 1/2
  EXPECT_EQ(c.np_table[40], 12);
  EXPECT_EQ(c.np_table[255], 12);
  EXPECT_NEAR(c.cut1, 5 + std::log(1e7) / 1.6, 1e-4);
  EXPECT_NEAR(c.cut2, M_PI / 12 + std::log(1e7) / 30, 1e-5);
}

TEST(Lss, LocalSimilarityMatchesBitByBitFormula) {
  const LssConstants c = MakeLssConstants(LssParams());
  const auto t = Build(TestTemplates(1, 20, 21));
  std::mt19937 rng(5);
  int nonzero = 0;
  for (int i = 0; i < 4000; ++i) {
    const MccTemplate& x = t[rng() % t.size()];
    const MccTemplate& y = t[rng() % t.size()];
    if (x.cylinders.empty() || y.cylinders.empty()) continue;
    const MccCylinder& a = x.cylinders[rng() % x.cylinders.size()];
    const MccCylinder& b = y.cylinders[rng() % y.cylinders.size()];
    const double want = BruteLambda(a, b, c.min_common_cells);
    ASSERT_NEAR(cpu::LocalSimilarity(a, b, c), want, 1e-6)
        << "theta " << a.theta << " " << b.theta << " diff " << fpmath::AngleDiffF(a.theta, b.theta);
    nonzero += want > 0;
  }
  EXPECT_GT(nonzero, 500);
  // A cylinder against itself: 1.
  const MccCylinder& a = t[0].cylinders[0];
  EXPECT_FLOAT_EQ(cpu::LocalSimilarity(a, a, c), 1.0f);
  // Directions more than pi/2 apart: not matchable.
  MccCylinder turned = a;
  turned.theta = a.theta + 1.6f;
  EXPECT_EQ(cpu::LocalSimilarity(a, turned, c), 0.0f);
}

// The optimized CPU matcher must return the plain reference's floats exactly,
// on every CPU path this machine runs (the path travels in the constants).
TEST(Lss, OptimizedScoreEqualsReferenceExactly) {
  const std::vector<LssCpuPath> paths = cpu::AvailableCpuPaths();
  ASSERT_FALSE(paths.empty());
  EXPECT_EQ(paths[0], LssCpuPath::kScalar);
  int compared = 0;
  for (int db = 1; db <= 4; ++db) {
    const auto t = Build(TestTemplates(db, 40, 22));
    const int n = std::min<int>(t.size(), 40);
    MccGallery g;
    for (int j = 0; j < n; ++j) g.Append(t[j]);
    for (LssCpuPath path : paths) {
      LssConstants c = MakeLssConstants(LssParams());
      c.cpu_path = path;
      ASSERT_STREQ(cpu::PopcountPath(c), cpu::LssCpuPathName(path));
      for (int i = 0; i < n; ++i) {
        const LssProbe probe = PrepareProbe(t[i]);
        for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) {
          std::vector<float> scores(n);
          cpu::ScoreGallery(probe, g, kind, c, scores.data(), 1);
          for (int j = 0; j < n; ++j) {
            const float want = cpu::ReferenceScore(t[i], t[j], kind, c);
            ASSERT_EQ(scores[j], want) << "DB" << db << " probe " << i << " gallery " << j << " path "
                                       << cpu::LssCpuPathName(path);
            ++compared;
          }
        }
      }
    }
  }
  std::printf("%d scores identical to the reference over %zu CPU paths\n", compared, paths.size());
}

// Two calls with different paths interleaved on one thread: each uses its
// own (nothing is left behind by the other).
TEST(Lss, CpuPathTravelsWithTheCall) {
  const auto t = Build(TestTemplates(3, 12, 25));
  MccGallery g;
  for (const auto& x : t) g.Append(x);
  const LssProbe probe = PrepareProbe(t[1]);
  LssConstants scalar = MakeLssConstants(LssParams());
  scalar.cpu_path = LssCpuPath::kScalar;
  LssConstants automatic = scalar;
  automatic.cpu_path = LssCpuPath::kAuto;
  EXPECT_STREQ(cpu::PopcountPath(scalar), "scalar-popcnt");
  EXPECT_NE(cpu::ResolveCpuPath(LssCpuPath::kAuto), LssCpuPath::kAuto);
  for (int j = 0; j < g.num_templates(); ++j) {
    const float a = cpu::Score(probe, g, j, MccScore::kLssR, automatic);
    const float s = cpu::Score(probe, g, j, MccScore::kLssR, scalar);
    EXPECT_EQ(a, s) << "gallery " << j;
    EXPECT_EQ(s, cpu::ReferenceScore(t[1], t[j], MccScore::kLssR, scalar));
  }
  // A vector path the CPU lacks runs as the scalar one; a value outside the
  // enum runs as kAuto.
  for (LssCpuPath path : {LssCpuPath::kAvx512, static_cast<LssCpuPath>(200)}) {
    const LssCpuPath resolved = cpu::ResolveCpuPath(path);
    const std::vector<LssCpuPath> available = cpu::AvailableCpuPaths();
    EXPECT_NE(std::find(available.begin(), available.end(), resolved), available.end());
  }
}

TEST(Lss, CpuPathNamesParse) {
  for (LssCpuPath path : {LssCpuPath::kAuto, LssCpuPath::kScalar, LssCpuPath::kAvx512}) {
    const auto parsed = cpu::ParseLssCpuPath(cpu::LssCpuPathName(path));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, path);
  }
  EXPECT_EQ(*cpu::ParseLssCpuPath("scalar"), LssCpuPath::kScalar);
  const auto bad = cpu::ParseLssCpuPath("avx1024");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("avx1024"), absl::string_view::npos);
}

TEST(Lss, ThreadsGiveTheSameScores) {
  const LssConstants c = MakeLssConstants(LssParams());
  const auto t = Build(TestTemplates(2, 30, 23));
  MccGallery g;
  for (const auto& x : t) g.Append(x);
  const LssProbe probe = PrepareProbe(t[3]);
  std::vector<float> one(g.num_templates()), many(g.num_templates());
  cpu::ScoreGallery(probe, g, MccScore::kLssR, c, one.data(), 1);
  cpu::ScoreGallery(probe, g, MccScore::kLssR, c, many.data(), 3);
  EXPECT_EQ(one, many);
}

TEST(Lss, SeparatesGenuineFromImpostorOnRealData) {
  std::vector<int> fingers;
  const auto pts = testing::RealTemplates(1, &fingers);
  if (pts.empty()) GTEST_SKIP() << "FVC2002 data not found";
  const LssConstants c = MakeLssConstants(LssParams());
  const auto t = Build(pts);
  double genuine = 0, impostor = 0;
  int ng = 0, ni = 0;
  for (size_t i = 0; i < t.size(); i += 3) {
    for (size_t j = 0; j < t.size(); ++j) {
      if (i == j) continue;
      const float s = cpu::Score(t[i], t[j], MccScore::kLssR, c);
      EXPECT_GE(s, 0.0f);
      EXPECT_LE(s, 1.0f);
      (fingers[i] == fingers[j] ? genuine : impostor) += s;
      (fingers[i] == fingers[j] ? ng : ni) += 1;
    }
  }
  genuine /= ng;
  impostor /= ni;
  std::printf("LSS-R mean genuine %.3f, impostor %.3f\n", genuine, impostor);
  EXPECT_GT(genuine, 4 * impostor);
  // A template against itself scores higher than against any other.
  for (size_t i = 0; i < t.size(); i += 9) {
    const float self = cpu::Score(t[i], t[i], MccScore::kLssR, c);
    for (size_t j = 0; j < t.size(); ++j) {
      if (j != i) EXPECT_GT(self, cpu::Score(t[i], t[j], MccScore::kLssR, c));
    }
  }
}

// The pairs ReferenceLssRSelection reports are the ones the score sums: the
// relaxed values added in the reported order give the score bit for bit,
// the score is Score's, and a template against itself pairs each cylinder
// with itself.
TEST(Lss, SelectionIsThePairsTheScoreSums) {
  const LssConstants c = MakeLssConstants(LssParams());
  const auto t = Build(TestTemplates(1, 16, 26));
  const int n = std::min<int>(t.size(), 16);
  int with_pairs = 0;
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const cpu::LssRSelection sel = cpu::ReferenceLssRSelection(t[i], t[j], c);
      ASSERT_EQ(sel.score, cpu::Score(t[i], t[j], MccScore::kLssR, c)) << i << " vs " << j;
      ASSERT_EQ(sel.np, c.np_table[std::min(t[i].cylinders.size(), t[j].cylinders.size())]);
      ASSERT_LE(static_cast<int>(sel.pairs.size()), sel.np);
      float sum = 0.0f;
      for (size_t k = 0; k < sel.pairs.size(); ++k) {
        const cpu::LssRPair& p = sel.pairs[k];
        ASSERT_GE(p.a, 0);
        ASSERT_LT(p.a, static_cast<int>(t[i].cylinders.size()));
        ASSERT_GE(p.b, 0);
        ASSERT_LT(p.b, static_cast<int>(t[j].cylinders.size()));
        EXPECT_GT(p.local, 0.0f);
        EXPECT_EQ(p.local, cpu::LocalSimilarity(t[i].cylinders[p.a], t[j].cylinders[p.b], c));
        if (k > 0) {  // taken by efficiency, best first
          const cpu::LssRPair& q = sel.pairs[k - 1];
          EXPECT_GE(q.relaxed / q.local, p.relaxed / p.local);
        }
        for (size_t m = 0; m < k; ++m) EXPECT_FALSE(sel.pairs[m].a == p.a && sel.pairs[m].b == p.b);
        sum = sum + p.relaxed;
      }
      EXPECT_EQ(sel.score, std::min(1.0f, std::max(0.0f, sum / static_cast<float>(sel.np))));
      with_pairs += !sel.pairs.empty();
      if (i == j) {
        for (const cpu::LssRPair& p : sel.pairs) EXPECT_EQ(p.a, p.b) << "template " << i;
      }
    }
  }
  EXPECT_GT(with_pairs, n);  // not a vacuous pass
  MccTemplate empty;
  EXPECT_TRUE(cpu::ReferenceLssRSelection(empty, t[0], c).pairs.empty());
  EXPECT_EQ(cpu::ReferenceLssRSelection(t[0], empty, c).score, 0.0f);
}

TEST(Lss, EmptyTemplatesScoreZero) {
  const LssConstants c = MakeLssConstants(LssParams());
  const auto t = Build(TestTemplates(4, 2, 24));
  MccTemplate empty;
  EXPECT_EQ(cpu::Score(empty, t[0], MccScore::kLssR, c), 0.0f);
  EXPECT_EQ(cpu::Score(t[0], empty, MccScore::kLss, c), 0.0f);
  EXPECT_EQ(cpu::ReferenceScore(empty, empty, MccScore::kLssR, c), 0.0f);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
