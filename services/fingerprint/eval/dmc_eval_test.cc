// Accuracy of DMC and of the DMC + LSS-R fusion on FVC2002 DB1-DB4 set B
// (CPU, all cores), against floors set a little below what this
// implementation measured (bench/results/2026-11-30-cpu-fingerprint-dmc.md).
// Every floor is better than OpenAFIS on the same data (TARGETS.md: EER
// 6.8 / 6.7 / 15.0 / 7.1 %, rank-1 100 / 98.75 / 93.75 / 100 %); the fusion's
// EER floors are also at or below LSS-R's measured EER (2.13 / 1.83 / 6.06 /
// 1.06 %).
#include <gtest/gtest.h>

#include "services/fingerprint/eval/eval.h"
#include "services/fingerprint/formats/fvc_data.h"

namespace tessera {
namespace fingerprint {
namespace {

struct Floor {
  int db;
  double max_eer, max_fmr1000, min_rank1, min_rank10;  // percent
};

void CheckFloors(EvalMatcher matcher, const Floor (&floors)[4]) {
  auto dir = FindFingerprintDataDir();
  if (!dir.ok()) GTEST_SKIP() << dir.status();
  EvalOptions options;
  options.matcher = matcher;
  options.threads = 0;
  for (const Floor& f : floors) {
    auto e = EvaluateFvc2002Db(*dir, f.db, options);
    ASSERT_TRUE(e.ok()) << e.status();
    const double eer = 100 * e->verification.eer, fmr1000 = 100 * e->verification.fmr1000;
    const double rank1 = 100 * e->identification.rank1, rank10 = 100 * e->identification.rank10;
    std::printf("DB%d: EER %.2f%% FMR1000 %.2f%% rank-1 %.2f%% rank-10 %.2f%%\n", f.db, eer, fmr1000, rank1, rank10);
    EXPECT_LE(eer, f.max_eer) << "DB" << f.db;
    EXPECT_LE(fmr1000, f.max_fmr1000) << "DB" << f.db;
    EXPECT_GE(rank1, f.min_rank1) << "DB" << f.db;
    EXPECT_GE(rank10, f.min_rank10) << "DB" << f.db;
  }
}

TEST(FvcDmcAccuracy, DmcMeetsFloors) {
  // Measured (2026-11-30): EER 1.25 / 0.35 / 6.27 / 1.01 %, FMR1000 5.36 /
  // 1.07 / 31.07 / 3.21 %, rank-1 100 / 100 / 98.75 / 100 %, rank-10 100 %.
  const Floor floors[4] = {{1, 1.5, 6.5, 100, 100}, {2, 0.6, 2.0, 100, 100},
                           {3, 6.8, 34.0, 98.75, 100}, {4, 1.3, 4.0, 100, 100}};
  CheckFloors(EvalMatcher::kDmc, floors);
}

TEST(FvcDmcAccuracy, FusionMeetsFloorsAndBeatsLssR) {
  // Measured (2026-11-30): EER 1.25 / 0.35 / 5.52 / 0.89 %, FMR1000 4.46 /
  // 1.43 / 21.43 / 2.50 %, rank-1 100 % and rank-10 100 % on every DB.
  const Floor floors[4] = {{1, 1.5, 5.5, 100, 100}, {2, 0.6, 2.0, 100, 100},
                           {3, 5.9, 23.0, 100, 100}, {4, 1.05, 3.0, 100, 100}};
  CheckFloors(EvalMatcher::kFusion, floors);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
