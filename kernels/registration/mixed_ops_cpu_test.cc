// MaxAbsCpu (issue 38: an integer max of the bf16 bit patterns, vectorised)
// against the scalar fold it replaced, per ParallelFor chunk as before: the
// same bits on random values, with infinities, and with NaNs (where the fold's
// result depends on their positions).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/registration/mixed_ops.h"
#include "kernels/registration/parallel.h"
#include "kernels/registration/storage16.h"
#include "kernels/registration/test_util.h"

namespace tessera::registration {
namespace {

float FoldMaxAbs(const std::vector<BFloat16>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> partial(ParallelChunks(n), 0.f);
  ParallelFor(n, [&](int64_t b, int64_t e, int chunk) {
    float m = 0.f;
    for (int64_t i = b; i < e; ++i) {
      const float a = std::fabs(ToFloat(x[i]));
      if (!(a <= m)) m = a;
    }
    partial[chunk] = m;
  });
  float m = 0.f;
  for (float p : partial) {
    if (!(p <= m)) m = p;
  }
  return m;
}

void ExpectSameBits(const std::vector<BFloat16>& x, const char* what) {
  const float want = FoldMaxAbs(x), got = mixed_internal::MaxAbsCpu(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(std::memcmp(&want, &got, sizeof want), 0) << what << ": " << want << " vs " << got;
}

TEST(MixedOpsCpu, MaxAbsMatchesTheScalarFold) {
  for (const int64_t n : {int64_t{1}, int64_t{37}, int64_t{1000}, int64_t{300001}}) {
    SCOPED_TRACE(n);
    const std::vector<float> v = testing::RandomUniform<float>(n, -3.0, 2.0, 7 + n);
    std::vector<BFloat16> x(n);
    for (int64_t i = 0; i < n; ++i) x[i] = FromFloat<BFloat16>(v[i]);
    ExpectSameBits(x, "random");
    x[n / 2] = FromFloat<BFloat16>(-std::numeric_limits<float>::infinity());
    ExpectSameBits(x, "-inf");
    const BFloat16 nan = FromFloat<BFloat16>(std::numeric_limits<float>::quiet_NaN());
    x[n / 3] = nan;
    ExpectSameBits(x, "a NaN inside");
    x[n - 1] = nan;
    ExpectSameBits(x, "a NaN last");
  }
}

}  // namespace
}  // namespace tessera::registration
