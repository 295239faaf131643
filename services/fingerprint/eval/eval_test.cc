// Accuracy of MCC + LSS-R on FVC2002 DB1-DB4 set B (CPU), against floors set
// a little below what this implementation measured (bench/results/
// 2026-11-30-cpu-fingerprint.md): they catch regressions, and every one of
// them is better than the OpenAFIS anchor on the same data (TARGETS.md:
// EER 6.8 / 6.7 / 15.0 / 7.1 %, rank-1 100 / 98.75 / 93.75 / 100 %).
// Also unit tests of the metrics.
#include "services/fingerprint/eval/eval.h"

#include <gtest/gtest.h>

#include "services/fingerprint/formats/fvc_data.h"

namespace tessera {
namespace fingerprint {
namespace {

TEST(Metrics, EerOfSeparatedAndOverlappingScores) {
  VerificationMetrics m = ComputeVerificationMetrics({0.9, 0.8, 0.7}, {0.1, 0.2, 0.3, 0.4});
  EXPECT_EQ(m.eer, 0.0);
  EXPECT_EQ(m.fmr1000, 0.0);
  EXPECT_EQ(m.zero_fmr, 0.0);
  // Identical distributions: EER 50%.
  m = ComputeVerificationMetrics({0.1, 0.2, 0.3, 0.4}, {0.1, 0.2, 0.3, 0.4});
  EXPECT_NEAR(m.eer, 0.5, 0.13);
  // One impostor above one genuine of four: at t = 0.6 FMR = 1/4 (0.7 >= t),
  // FNMR = 1/4 (0.5 < t).
  m = ComputeVerificationMetrics({0.5, 0.8, 0.9, 1.0}, {0.1, 0.2, 0.3, 0.7});
  EXPECT_DOUBLE_EQ(m.eer, 0.25);
  EXPECT_DOUBLE_EQ(m.zero_fmr, 0.25);  // threshold above 0.7 rejects only 0.5
  EXPECT_EQ(m.genuine, 4);
  EXPECT_EQ(m.impostor, 4);
}

TEST(Metrics, IdentificationRanks) {
  // 4 entries, fingers {1, 1, 2, 2}; scores row = probe.
  const std::vector<int> labels = {1, 1, 2, 2};
  const std::vector<float> s = {
      0, 0.9f, 0.1f, 0.2f,  // probe 0: mate first -> rank 1
      0.3f, 0, 0.5f, 0.1f,  // probe 1: non-mate 0.5 above mate 0.3 -> rank 2
      0.1f, 0.1f, 0, 0.1f,  // probe 2: tie with non-mates counts against -> rank 3
      0.2f, 0.2f, 0.6f, 0,  // probe 3: rank 1
  };
  const IdentificationMetrics id = ComputeIdentification(s, labels);
  ASSERT_EQ(id.probes, 4);
  EXPECT_EQ(id.ranks, (std::vector<int>{1, 2, 3, 1}));
  EXPECT_DOUBLE_EQ(id.rank1, 0.5);
  EXPECT_DOUBLE_EQ(id.rank10, 1.0);
}

struct Floor {
  int db;
  double max_eer, max_fmr1000, min_rank1, min_rank10;  // percent
  double openafis_eer, openafis_rank1;
};

TEST(FvcAccuracy, LssRMeetsFloorsAndBeatsOpenAfis) {
  auto dir = FindFingerprintDataDir();
  ASSERT_TRUE(dir.ok()) << dir.status();
  // Measured (2026-11-30): EER 2.13 / 1.83 / 6.06 / 1.07 %, FMR1000 10.36 /
  // 7.86 / 23.57 / 1.79 %, rank-1 100 / 100 / 98.75 / 100 %, rank-10 100 %.
  const Floor floors[] = {
      {1, 2.5, 12.0, 98.75, 100.0, 6.8, 100.0},
      {2, 2.2, 9.5, 98.75, 100.0, 6.7, 98.75},
      {3, 6.6, 26.0, 97.5, 98.75, 15.0, 93.75},
      {4, 1.5, 3.0, 98.75, 100.0, 7.1, 100.0},
  };
  EvalOptions options;
  options.score = MccScore::kLssR;
  options.threads = 2;
  for (const Floor& f : floors) {
    auto e = EvaluateFvc2002Db(*dir, f.db, options);
    ASSERT_TRUE(e.ok()) << e.status();
    const double eer = 100 * e->verification.eer, fmr1000 = 100 * e->verification.fmr1000;
    const double rank1 = 100 * e->identification.rank1, rank10 = 100 * e->identification.rank10;
    std::printf("DB%d LSS-R: EER %.2f%%  FMR1000 %.2f%%  rank-1 %.2f%%  rank-10 %.2f%%  (%d genuine, %d impostor)\n",
                f.db, eer, fmr1000, rank1, rank10, e->verification.genuine, e->verification.impostor);
    EXPECT_EQ(e->verification.genuine, 560);
    EXPECT_EQ(e->verification.impostor, 5760);
    EXPECT_EQ(e->identification.probes, 80);
    EXPECT_LE(eer, f.max_eer) << "DB" << f.db;
    EXPECT_LE(fmr1000, f.max_fmr1000) << "DB" << f.db;
    EXPECT_GE(rank1, f.min_rank1) << "DB" << f.db;
    EXPECT_GE(rank10, f.min_rank10) << "DB" << f.db;
    EXPECT_LT(eer, f.openafis_eer) << "DB" << f.db;
    EXPECT_GE(rank1, f.openafis_rank1) << "DB" << f.db;
  }
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
