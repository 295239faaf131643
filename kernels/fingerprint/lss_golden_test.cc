// LSS / LSS-R scores frozen before the CPU matcher's 2026-12-02 speed-up
// (issue 16): the optimized matcher must keep returning the same floats, bit
// for bit, on a fixed set of random templates (synthetic, so the test does not
// depend on the FVC2002 data) and on jittered, rotated copies of them (mates,
// where the relaxation has compatible pairs to work with). The hashes were
// recorded with the matcher of commit c910830; every score also has to equal
// cpu::ReferenceScore (lss_test.cc), so a change of numerics shows up twice.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/test_templates.h"

namespace tessera {
namespace fingerprint {
namespace {

// 24 random templates and, for each, a mate: rotated by a random angle about
// the image centre, shifted, every minutia jittered by up to 3 px / 3 ISO
// angle units, a few minutiae dropped.
std::vector<MccTemplate> GoldenTemplates() {
  auto points = testing::SyntheticTemplates(24, 20261202);
  std::mt19937 rng(16);
  const size_t n = points.size();
  for (size_t i = 0; i < n; ++i) {
    const float turn = std::uniform_int_distribution<int>(-20, 20)(rng) * static_cast<float>(2 * M_PI / 256);
    const float dx = std::uniform_int_distribution<int>(-25, 25)(rng);
    const float dy = std::uniform_int_distribution<int>(-25, 25)(rng);
    std::vector<MinutiaPoint> mate;
    for (const MinutiaPoint& m : points[i]) {
      if (std::uniform_int_distribution<int>(0, 9)(rng) == 0) continue;
      const float x = m.x - 150, y = m.y - 200;
      MinutiaPoint r;
      r.x = std::round(150 + std::cos(turn) * x + std::sin(turn) * y + dx +
                       std::uniform_int_distribution<int>(-3, 3)(rng));
      r.y = std::round(200 - std::sin(turn) * x + std::cos(turn) * y + dy +
                       std::uniform_int_distribution<int>(-3, 3)(rng));
      float theta = m.theta + turn + std::uniform_int_distribution<int>(-3, 3)(rng) * static_cast<float>(2 * M_PI / 256);
      theta = std::fmod(theta + static_cast<float>(4 * M_PI), static_cast<float>(2 * M_PI));
      r.theta = theta;
      mate.push_back(r);
    }
    points.push_back(mate);
  }
  std::vector<MccTemplate> out;
  for (const auto& p : points) out.push_back(cpu::BuildMccTemplate(p));
  return out;
}

uint64_t Fnv1a(uint64_t h, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  for (int i = 0; i < 4; ++i) {
    h ^= (bits >> (8 * i)) & 0xff;
    h *= 1099511628211ull;
  }
  return h;
}

struct Summary {
  uint64_t hash = 14695981039346656037ull;
  double sum = 0;
  int positive = 0, pruned = 0;
};

// Every template as probe against all of them, on CPU path `path`;
// `threshold` > 0 goes through ScoreOrPrune (pruned comparisons hash as
// kLssPrunedScore).
Summary ScoreAll(const std::vector<MccTemplate>& t, MccScore kind, float threshold, LssCpuPath path) {
  LssConstants c = MakeLssConstants(LssParams());
  c.cpu_path = path;
  MccGallery g;
  for (const auto& x : t) g.Append(x);
  Summary s;
  for (const auto& probe_template : t) {
    const LssProbe probe = PrepareProbe(probe_template);
    for (int j = 0; j < g.num_templates(); ++j) {
      const float v = threshold > 0 ? cpu::ScoreOrPrune(probe, g, j, kind, c, threshold)
                                    : cpu::Score(probe, g, j, kind, c);
      s.hash = Fnv1a(s.hash, v);
      if (v == kLssPrunedScore) {
        ++s.pruned;
        continue;
      }
      s.sum += v;
      s.positive += v > 0;
    }
  }
  return s;
}

struct Expected {
  MccScore kind;
  float threshold;
  uint64_t hash;
  int positive, pruned;
};

TEST(LssGolden, ScoresEqualTheFrozenOnes) {
  const auto t = GoldenTemplates();
  ASSERT_EQ(t.size(), 48u);
  const Expected expected[] = {
      {MccScore::kLssR, 0.0f, 0xf047f79ac13edbbfull, 2304, 0},
      {MccScore::kLss, 0.0f, 0x0e88de30e7b5bc09ull, 2304, 0},
      {MccScore::kLssR, 0.03f, 0xcac016bc5d5ac5d2ull, 98, 2206},
      {MccScore::kLss, 0.45f, 0xfe6753c7e121311dull, 98, 2206},
  };
  // Every CPU path this machine runs (the scalar one everywhere).
  for (LssCpuPath path : cpu::AvailableCpuPaths()) {
    for (const Expected& e : expected) {
      const Summary s = ScoreAll(t, e.kind, e.threshold, path);
      std::printf("%s %s threshold %.2f: hash 0x%016llx, %d positive, %d pruned, sum %.6f\n",
                  cpu::LssCpuPathName(path), e.kind == MccScore::kLssR ? "LSS-R" : "LSS", e.threshold,
                  static_cast<unsigned long long>(s.hash), s.positive, s.pruned, s.sum);
      EXPECT_EQ(s.hash, e.hash) << cpu::LssCpuPathName(path) << (e.kind == MccScore::kLssR ? " LSS-R" : " LSS")
                                << " threshold " << e.threshold;
      EXPECT_EQ(s.positive, e.positive);
      EXPECT_EQ(s.pruned, e.pruned);
    }
  }
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
