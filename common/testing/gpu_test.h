// GoogleTest helpers for CPU-vs-CUDA parity tests.
#ifndef TESSERA_COMMON_TESTING_GPU_TEST_H_
#define TESSERA_COMMON_TESTING_GPU_TEST_H_

#include <gtest/gtest.h>

#include "common/device.h"

// Skips the current test (counted as skipped, not passed) when this process
// has no usable GPU, naming the reason; on a GPU machine the test runs.
#define TESSERA_SKIP_WITHOUT_GPU()                                                 \
  do {                                                                             \
    if (!::tessera::DeviceRegistry::Get().cuda_available()) {                      \
      GTEST_SKIP() << ::tessera::DeviceRegistry::Get().cuda_unavailable_reason();  \
    }                                                                              \
  } while (0)

#endif  // TESSERA_COMMON_TESTING_GPU_TEST_H_
