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

}  // namespace
}  // namespace tessera::registration
