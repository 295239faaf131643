// StagedCopyToDevice / StagedCopyToHost against plain CopyBytes: random bytes
// (never zeros) of sizes around the chunk (one chunk, several, a partial last
// one, an odd length, below the direct threshold), round trip bit for bit;
// the destination's bytes outside the range untouched.
#include "kernels/som/staged_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/buffer.h"
#include "common/testing/gpu_test.h"

namespace tessera {
namespace som {
namespace {

TEST(StagedCopyCuda, RoundTripMatchesCopyBytes) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(37);
  StagingOptions o;
  o.chunk_bytes = size_t{1} << 20;
  o.direct_below = 4096;
  for (size_t bytes : {size_t{1000}, size_t{1} << 20, (size_t{1} << 20) + 1, size_t{5} << 20, (size_t{7} << 20) + 333}) {
    SCOPED_TRACE(bytes);
    std::vector<uint8_t> host(bytes);
    for (auto& b : host) b = static_cast<uint8_t>(1 + rng() % 255);
    auto device = Buffer::Allocate(MemoryKind::kDevice, bytes + 64).value();
    ASSERT_TRUE(StagedCopyToDevice(device->data(), host.data(), bytes, stream, o).ok());
    std::vector<uint8_t> check(bytes, 0);
    ASSERT_TRUE(CopyBytes(check.data(), MemoryKind::kHost, device->data(), MemoryKind::kDevice, bytes, stream).ok());
    ASSERT_EQ(0, std::memcmp(check.data(), host.data(), bytes));
    std::vector<uint8_t> back(bytes + 16, 0xA5);
    ASSERT_TRUE(StagedCopyToHost(back.data() + 8, device->data(), bytes, stream, o).ok());
    ASSERT_EQ(0, std::memcmp(back.data() + 8, host.data(), bytes));
    for (int k = 0; k < 8; ++k) {
      EXPECT_EQ(back[k], 0xA5);
      EXPECT_EQ(back[bytes + 8 + k], 0xA5);
    }
  }
}

}  // namespace
}  // namespace som
}  // namespace tessera
