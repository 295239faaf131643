// CUDA B-spline evaluation against the CPU reference on random coefficients
// and random positions (inside, near and beyond the borders). Both accumulate
// the same taps in double; the tolerance (1e-5 of the value range) covers
// the GPU's own rounding of the weights.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "common/testing/gpu_test.h"
#include "kernels/registration/bspline_interpolation.h"

namespace tessera::registration {
namespace {

TEST(BsplineCuda, MatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> value(-100, 300);
  const Dims3 d{23, 17, 11};
  NDArray image = NDArray::Allocate({d.nx, d.ny, d.nz}, DType::kFloat32).value();
  for (int64_t i = 0; i < image.num_elements(); ++i) image.data<float>()[i] = value(rng);
  const NDArray c = BsplineCoefficients(image).value();
  const int64_t count = 50000;
  NDArray pos = NDArray::Allocate({count, 3}, DType::kFloat32).value();
  const double n[3] = {double(d.nx), double(d.ny), double(d.nz)};
  for (int axis = 0; axis < 3; ++axis) {
    std::uniform_real_distribution<float> p(-1.5f, float(n[axis]) + 0.5f);
    for (int64_t i = 0; i < count; ++i) pos.data<float>()[axis * count + i] = p(rng);
  }
  std::vector<float> want(count);
  BsplineSampleArgs args{c.data<float>(), d, pos.data<float>(), count, -3.0f};
  ASSERT_TRUE(BsplineSample(Stream::Cpu(), args, want.data()).ok());

  Stream stream = Stream::Create(Backend::kCuda).value();
  NDArray c_dev = c.CopyTo(MemoryKind::kDevice, stream, 0).value();
  NDArray pos_dev = pos.CopyTo(MemoryKind::kDevice, stream, 0).value();
  NDArray out_dev = NDArray::Allocate({count}, DType::kFloat32, MemoryKind::kDevice, 0).value();
  BsplineSampleArgs dev_args{c_dev.data<float>(), d, pos_dev.data<float>(), count, -3.0f};
  ASSERT_TRUE(BsplineSample(stream, dev_args, out_dev.data<float>()).ok());
  NDArray got = out_dev.CopyTo(MemoryKind::kHost, stream).value();
  ASSERT_TRUE(stream.Synchronize().ok());
  double worst = 0;
  int64_t outside = 0;
  for (int64_t i = 0; i < count; ++i) {
    worst = std::max(worst, double(std::fabs(got.data<float>()[i] - want[i])));
    outside += want[i] == -3.0f;
  }
  EXPECT_GT(outside, 0);
  EXPECT_LT(worst, 1e-5 * 400);
}

}  // namespace
}  // namespace tessera::registration
