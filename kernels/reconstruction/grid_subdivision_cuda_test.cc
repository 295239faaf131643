// CUDA block average against the CPU reference on random inputs (never
// zeros), 2-D and 3-D factors, a coarse size that is not a multiple of the
// thread block. Both sum each block in double in the same order, so they
// agree to the last bit; the tolerance stated is 0.
#include <gtest/gtest.h>

#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/grid_subdivision.h"

namespace tessera {
namespace recon {
namespace {

TEST(GridSubdivisionCudaTest, BlockAverageMatchesCpuBitForBit) {
  TESSERA_SKIP_WITHOUT_GPU();
  absl::StatusOr<Stream> stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  const Stream cpu = Stream::Cpu();
  for (const BlockShape& s : {BlockShape{257, 131, 1, 2, 2, 1}, BlockShape{67, 45, 23, 2, 2, 2},
                              BlockShape{33, 29, 1, 3, 3, 1}, BlockShape{17, 19, 11, 4, 3, 2}}) {
    const std::vector<float> fine = ::tessera::testing::RandomUniform<float>(s.fine_size(), 0.1, 3.0, 11);
    std::vector<float> want(s.coarse_size());
    ASSERT_TRUE(BlockAverage(cpu, fine.data(), s, want.data()).ok());
    auto d_fine = ::tessera::testing::DeviceArray<float>::FromHost(fine, *stream);
    auto d_out = ::tessera::testing::DeviceArray<float>::Allocate(s.coarse_size(), *stream);
    d_out.Poison(::tessera::testing::kNaN);
    ASSERT_TRUE(BlockAverage(*stream, d_fine.data(), s, d_out.data()).ok());
    const std::vector<float> got = d_out.Download();
    int64_t differ = 0;
    for (int64_t v = 0; v < s.coarse_size(); ++v) differ += got[v] != want[v];
    EXPECT_EQ(differ, 0) << s.nx << "x" << s.ny << "x" << s.nz << " / " << s.fx << s.fy << s.fz;
  }
}

}  // namespace
}  // namespace recon
}  // namespace tessera
