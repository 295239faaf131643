// LargestFiniteMagnitude against max(|min|, |max|) of ComputeArrayStatsCpu
// (what the steps used before): the same double on random arrays with
// negative extremes, NaN, infinities, lengths around the vector width and
// several threads' chunks, and 0 for an empty or all-non-finite array.
#include "kernels/registration/pipeline/largest_magnitude.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/array_stats.h"
#include "common/testing/device_array.h"

namespace tessera::registration {
namespace {

double StatsLargest(const std::vector<float>& v) {
  NDArray a = NDArray::Allocate({static_cast<int64_t>(v.size())}, DType::kFloat32, MemoryKind::kHost).value();
  std::copy(v.begin(), v.end(), a.data<float>());
  const ArrayStats s = ComputeArrayStatsCpu(a);
  return std::max(std::abs(s.min), std::abs(s.max));
}

double Largest(const std::vector<float>& v) {
  NDArray a = NDArray::Allocate({static_cast<int64_t>(v.size())}, DType::kFloat32, MemoryKind::kHost).value();
  std::copy(v.begin(), v.end(), a.data<float>());
  return LargestFiniteMagnitude(a, Stream::Cpu()).value();
}

TEST(LargestMagnitudeTest, MatchesTheStatistics) {
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t n : {1, 15, 16, 17, 100, 200003}) {
    std::vector<float> v = testing::RandomUniform<float>(n, -3.0, 2.0, 5 + static_cast<uint32_t>(n));
    SCOPED_TRACE(n);
    EXPECT_EQ(Largest(v), StatsLargest(v));
    EXPECT_GT(Largest(v), 0.0);
    // The largest magnitude negative, beside NaN and infinities.
    v[n / 2] = -7.5f;
    if (n > 3) {
      v[0] = std::numeric_limits<float>::quiet_NaN();
      v[n - 1] = inf;
      v[1] = -inf;
    }
    EXPECT_EQ(Largest(v), StatsLargest(v));
    EXPECT_EQ(Largest(v), 7.5);
  }
}

TEST(LargestMagnitudeTest, NothingFiniteIsZero) {
  EXPECT_EQ(Largest({}), 0.0);
  const std::vector<float> v(40, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(Largest(v), StatsLargest(v));
  EXPECT_EQ(Largest(v), 0.0);
}

}  // namespace
}  // namespace tessera::registration
