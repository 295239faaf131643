#include "common/device_warmup.h"

#include <gtest/gtest.h>

#include "common/device.h"

namespace tessera {
namespace {

// Whatever the host has, a warm-up returns, and the device resolves the same
// afterwards (on a GPU host the context it started is the one later used).
TEST(DeviceWarmUpTest, EveryDeviceNameJoinsAndLeavesResolutionUnchanged) {
  for (const char* name : {"cpu", "auto", "cuda", "nonsense"}) {
    const absl::StatusOr<Backend> before = ResolveBackend(name);
    { const DeviceWarmUp warm_up(name, 0); }
    const absl::StatusOr<Backend> after = ResolveBackend(name);
    EXPECT_EQ(before.ok(), after.ok()) << name;
    if (before.ok()) {
      EXPECT_EQ(*before, *after) << name;
      if (*after == Backend::kCuda) EXPECT_TRUE(Stream::Create(*after, 0).ok());
    }
  }
}

}  // namespace
}  // namespace tessera
