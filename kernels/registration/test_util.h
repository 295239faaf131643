// The registration tests' names for the shared parity-test helpers
// (common/testing/device_array.h).
#ifndef TESSERA_KERNELS_REGISTRATION_TEST_UTIL_H_
#define TESSERA_KERNELS_REGISTRATION_TEST_UTIL_H_

#include "common/testing/device_array.h"

namespace tessera {
namespace registration {
namespace testing {

using ::tessera::testing::Cast;
using ::tessera::testing::DeviceArray;
using ::tessera::testing::kNaN;
using ::tessera::testing::RandomUniform;
using ::tessera::testing::RelL2;

}  // namespace testing
}  // namespace registration
}  // namespace tessera

#endif  // TESSERA_KERNELS_REGISTRATION_TEST_UTIL_H_
