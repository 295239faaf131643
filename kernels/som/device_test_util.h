// Host <-> device copies for the SOM CUDA tests (a failed copy fails the test).
#ifndef TESSERA_KERNELS_SOM_DEVICE_TEST_UTIL_H_
#define TESSERA_KERNELS_SOM_DEVICE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "common/buffer.h"

namespace tessera {
namespace som {
namespace testutil {

template <typename T>
std::shared_ptr<Buffer> ToDevice(const std::vector<T>& v, const Stream& stream) {
  auto b = UploadVector(v, stream);
  EXPECT_TRUE(b.ok()) << b.status();
  return *b;
}

template <typename T>
std::vector<T> ToHost(const std::shared_ptr<Buffer>& b, size_t n, const Stream& stream) {
  std::vector<T> v(n);
  EXPECT_TRUE(CopyBytes(v.data(), MemoryKind::kHost, b->data(), MemoryKind::kDevice, n * sizeof(T), stream).ok());
  return v;
}

}  // namespace testutil
}  // namespace som
}  // namespace tessera

#endif  // TESSERA_KERNELS_SOM_DEVICE_TEST_UTIL_H_
