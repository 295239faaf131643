// The registration tests' names for the shared parity-test helpers
// (common/testing/device_array.h), and their bit-for-bit check.
#ifndef TESSERA_KERNELS_REGISTRATION_TEST_UTIL_H_
#define TESSERA_KERNELS_REGISTRATION_TEST_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "common/testing/device_array.h"
#include "gtest/gtest.h"

namespace tessera {
namespace registration {
namespace testing {

using ::tessera::testing::Cast;
using ::tessera::testing::DeviceArray;
using ::tessera::testing::kNaN;
using ::tessera::testing::RandomUniform;
using ::tessera::testing::RelL2;

// The same floats bit for bit (signed zeros and NaN payloads count): the
// contract of the CPU code paths (scalar, AVX2, AVX-512) with one another.
inline void ExpectSameBits(const std::vector<float>& a, const std::vector<float>& b, const char* what = "") {
  ASSERT_EQ(a.size(), b.size());
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++differ;
    }
  }
  EXPECT_EQ(differ, 0) << what << ": first at " << first << " (" << a[first] << " vs " << b[first] << ")";
}

// How many elements differ in their bits (any element type; every element
// when the sizes differ): for checks that print one number per array.
template <typename T>
int64_t CountDifferentBits(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return static_cast<int64_t>(std::max(a.size(), b.size()));
  int64_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += std::memcmp(&a[i], &b[i], sizeof(T)) != 0;
  return differ;
}

}  // namespace testing
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_TEST_UTIL_H_
