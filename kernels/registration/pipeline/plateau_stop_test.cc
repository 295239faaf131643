#include "kernels/registration/pipeline/plateau_stop.h"

#include "gtest/gtest.h"

namespace tessera::registration {
namespace {

TEST(PlateauStopTest, StopsAfterPatienceIterationsWithoutRealProgress) {
  PlateauStop stop(/*tolerance=*/0.01, /*patience=*/3);
  stop.Update(10.0);
  EXPECT_TRUE(stop.improved());
  EXPECT_FALSE(stop.done());
  stop.Update(9.0);  // 10 % better: progress
  EXPECT_FALSE(stop.done());
  stop.Update(8.999);  // a new best, but below tolerance * |best|
  EXPECT_TRUE(stop.improved());
  EXPECT_FALSE(stop.done());
  stop.Update(9.5);  // worse
  EXPECT_FALSE(stop.improved());
  EXPECT_FALSE(stop.done());
  stop.Update(9.2);
  EXPECT_TRUE(stop.done());
  EXPECT_DOUBLE_EQ(stop.first(), 10.0);
  EXPECT_DOUBLE_EQ(stop.last(), 9.2);
  EXPECT_DOUBLE_EQ(stop.best(), 8.999);
}

TEST(PlateauStopTest, RealProgressResetsTheCount) {
  PlateauStop stop(0.0, 2);
  stop.Update(5.0);
  stop.Update(6.0);
  stop.Update(4.0);  // progress: count back to 0
  EXPECT_FALSE(stop.done());
  stop.Update(4.0);  // equal is not better
  EXPECT_FALSE(stop.improved());
  EXPECT_FALSE(stop.done());
  stop.Update(4.5);
  EXPECT_TRUE(stop.done());
}

TEST(PlateauStopTest, NegativeLossesUseTheirMagnitude) {
  // LNCC losses are negative: tolerance is relative to |best|.
  PlateauStop stop(0.1, 1);
  stop.Update(-1.0);
  stop.Update(-1.05);  // 5 % of |best|: below tolerance
  EXPECT_TRUE(stop.done());
}

TEST(PlateauStopTest, WindowRuleEndsANoisyLossWhoseTrendHasStopped) {
  // +-0.001 noise on a drift of 1e-5 per iteration (a tenth of the rate):
  // the patience rule (1000) would run on; the window rule ends the scale as
  // soon as two windows of 10 are there.
  PlateauStop stop(/*tolerance=*/1e-3, /*patience=*/1000, /*window=*/10);
  int it = 0;
  while (it < 100 && !stop.done()) {
    stop.Update(-1.0 - 1e-5 * it + 0.001 * (it % 2 == 0 ? 1 : -1));
    ++it;
  }
  EXPECT_TRUE(stop.window_flat());
  EXPECT_EQ(it, 20);
}

TEST(PlateauStopTest, WindowRuleWaitsWhileTheLossStillFalls) {
  PlateauStop stop(1e-3, 1000, /*window=*/5);
  double loss = -1.0;
  for (int it = 0; it < 30; ++it, loss *= 1.01) {  // 1 % per iteration, ten times the rate
    stop.Update(loss);
    EXPECT_FALSE(stop.done()) << it;
  }
  int extra = 0;  // then flat: ends within two windows
  while (!stop.done() && extra < 100) {
    stop.Update(loss);
    ++extra;
  }
  EXPECT_TRUE(stop.window_flat());
  EXPECT_LE(extra, 10);
}

TEST(PlateauStopTest, WindowRuleNeedsAFlatterTrendWhenTheLossIsNoisier) {
  // The same drift below the rate (1e-4 per iteration, rate 1e-3): clean, the
  // rule fires at once; under +-0.02 noise the decrease is not confidently
  // below the rate, so it waits.
  PlateauStop clean(1e-3, 1000, /*window=*/10), noisy(1e-3, 1000, /*window=*/10);
  for (int it = 0; it < 200; ++it) {
    clean.Update(-1.0 - 1e-4 * it);
    noisy.Update(-1.0 - 1e-4 * it + 0.02 * (it % 2 == 0 ? 1 : -1));
    if (it + 1 == 20) EXPECT_TRUE(clean.window_flat());
    EXPECT_FALSE(noisy.done()) << it;
  }
}

TEST(PlateauStopTest, WindowZeroIsThePatienceRuleAlone) {
  PlateauStop with(1e-4, 3, /*window=*/0), without(1e-4, 3);
  for (double loss : {5.0, 4.0, 4.0, 4.0, 4.0}) {
    with.Update(loss);
    without.Update(loss);
    EXPECT_EQ(with.done(), without.done());
  }
  EXPECT_FALSE(with.window_flat());
}

TEST(PlateauStopTest, RemainingGainRuleStopsWhenTheBudgetsRestWouldGainTooLittle) {
  // A clean fall of 1e-3 per iteration (the confident bound per iteration
  // 1e-3 + 2 * 1e-3 / sqrt(10) / 10 = 1.063e-3), budget 100, gain 1 % of
  // |loss| (about 1.09): it ends once 1.063e-3 * (100 - k) < 0.0109, k = 90.
  PlateauStop stop(/*tolerance=*/1e-4, /*patience=*/1000, /*window=*/10, /*rate_rule=*/false, /*budget=*/100,
                   /*remaining_gain=*/0.01);
  int it = 0;
  while (it < 100 && !stop.done()) {
    stop.Update(-1.0 - 1e-3 * it);
    ++it;
  }
  EXPECT_TRUE(stop.little_left());
  EXPECT_EQ(it, 90);
}

TEST(PlateauStopTest, RemainingGainRuleLetsALevelThatStillFallsUseItsBudget) {
  // 0.1 % per iteration, ten times the rate: the rate rule alone would not
  // fire either; with 2 % still to gain over the last 20 iterations the
  // remaining-gain rule (0.2 %) waits until two iterations are left.
  PlateauStop stop(1e-4, 1000, /*window=*/10, /*rate_rule=*/false, /*budget=*/100, /*remaining_gain=*/0.002);
  double loss = -1.0;
  for (int it = 0; it < 98; ++it, loss *= 1.001) {
    stop.Update(loss);
    EXPECT_FALSE(stop.done()) << it;
  }
}

TEST(PlateauStopTest, RemainingGainRuleEndsAFlatLevelEarlyWithoutTheRateRule) {
  PlateauStop stop(1e-4, 1000, /*window=*/10, /*rate_rule=*/false, /*budget=*/100, /*remaining_gain=*/0.002);
  int it = 0;
  while (it < 100 && !stop.done()) {
    stop.Update(-1.0 + 1e-6 * (it % 2 == 0 ? 1 : -1));
    ++it;
  }
  EXPECT_TRUE(stop.little_left());
  EXPECT_EQ(it, 20);
}

TEST(PlateauStopTest, NoRateRuleAndNoGainIsThePatienceRuleAlone) {
  // Flat: either window rule would fire at the 20th loss; the patience rule
  // fires at the 50th (the first sets the best, 49 more do not beat it).
  PlateauStop with(1e-4, 50, /*window=*/10, /*rate_rule=*/false, /*budget=*/100, /*remaining_gain=*/0),
      without(1e-4, 50);
  for (int it = 0; it < 60; ++it) {
    with.Update(-1.0);
    without.Update(-1.0);
    EXPECT_EQ(with.done(), without.done()) << it;
    EXPECT_EQ(with.done(), it + 1 >= 50) << it;
  }
  EXPECT_FALSE(with.window_flat());
}

}  // namespace
}  // namespace tessera::registration
