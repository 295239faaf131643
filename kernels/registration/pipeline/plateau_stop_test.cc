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

}  // namespace
}  // namespace tessera::registration
