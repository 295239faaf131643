#include "common/device_warm_up.h"

#include "common/device.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

TEST(BackgroundDeviceWarmUp, CpuStartsNothing) {
  BackgroundDeviceWarmUp warm("cpu");
  EXPECT_FALSE(warm.started());
}

// With or without a GPU: the thread runs and ends by itself, and work after
// it sees the same registry; on a GPU host a stream opens on the warmed device.
TEST(BackgroundDeviceWarmUp, AutoAndCudaWarmThenWorkRuns) {
  for (const char* device : {"auto", "cuda", ""}) {
    SCOPED_TRACE(device);
    {
      BackgroundDeviceWarmUp warm(device);
      EXPECT_TRUE(warm.started());
    }
    const DeviceRegistry& registry = DeviceRegistry::Get();
    if (!registry.cuda_available()) continue;
    absl::StatusOr<Stream> stream = Stream::Create(Backend::kCuda);
    ASSERT_TRUE(stream.ok()) << stream.status();
    EXPECT_TRUE(stream->Synchronize().ok());
  }
}

// An ordinal past the last GPU is left to the work to report: no crash, no hang.
TEST(BackgroundDeviceWarmUp, MissingOrdinalIsQuiet) {
  BackgroundDeviceWarmUp warm("cuda", 1000);
  EXPECT_TRUE(warm.started());
}

}  // namespace
}  // namespace tessera
