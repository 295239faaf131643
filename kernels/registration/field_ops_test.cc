#include "kernels/registration/field_ops.h"

#include <gtest/gtest.h>

#include <random>

#include "common/testing/gpu_test.h"

namespace tessera {
namespace registration {
namespace {

NDArray RandomField(const Shape& shape, std::mt19937& rng) {
  NDArray a = NDArray::Allocate(shape, DType::kFloat32).value();
  std::uniform_real_distribution<float> u(-2, 2);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = u(rng);
  return a;
}

TEST(FieldOpsCpu, ScaleComponentsScalesEachPlane) {
  std::mt19937 rng(1);
  NDArray f = RandomField({4, 3, 2, 3}, rng);
  NDArray ref = f.Clone().value();
  ASSERT_TRUE(ScaleComponents(f, {2.f, -1.f, 0.5f}, Stream::Cpu()).ok());
  const int64_t n = 24;
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_EQ(f.data<float>()[i], 2.f * ref.data<float>()[i]);
    EXPECT_EQ(f.data<float>()[n + i], -ref.data<float>()[n + i]);
    EXPECT_EQ(f.data<float>()[2 * n + i], 0.5f * ref.data<float>()[2 * n + i]);
  }
  NDArray scalar = RandomField({4, 3, 2}, rng);
  EXPECT_EQ(ScaleComponents(scalar, {1, 1, 1}, Stream::Cpu()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(FieldOpsCpu, MixComponentsAppliesTheMatrixToEachVoxel) {
  std::mt19937 rng(4);
  NDArray f = RandomField({9, 7, 5, 3}, rng);
  NDArray ref = f.Clone().value();
  const std::array<double, 9> m = {0.9, -0.2, 0.1, 0.3, 1.1, -0.4, 0.05, 0.2, 0.7};
  ASSERT_TRUE(MixComponents(f, m, Stream::Cpu()).ok());
  const int64_t n = 9 * 7 * 5;
  for (int64_t i = 0; i < n; ++i) {
    const double u[3] = {ref.data<float>()[i], ref.data<float>()[n + i], ref.data<float>()[2 * n + i]};
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(f.data<float>()[r * n + i], static_cast<float>(m[r * 3] * u[0] + m[r * 3 + 1] * u[1] + m[r * 3 + 2] * u[2]))
          << i << " " << r;
    }
  }
  NDArray scalar = RandomField({4, 3, 2}, rng);
  EXPECT_EQ(MixComponents(scalar, m, Stream::Cpu()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(FieldOpsCpu, AxpyAndFillZero) {
  std::mt19937 rng(2);
  NDArray x = RandomField({5, 5, 5}, rng), y = RandomField({5, 5, 5}, rng);
  NDArray y0 = y.Clone().value();
  ASSERT_TRUE(Axpy(0.25f, x, y, Stream::Cpu()).ok());
  for (int64_t i = 0; i < y.num_elements(); ++i) {
    EXPECT_FLOAT_EQ(y.data<float>()[i], y0.data<float>()[i] + 0.25f * x.data<float>()[i]);
  }
  ASSERT_TRUE(FillZero(y, Stream::Cpu()).ok());
  for (int64_t i = 0; i < y.num_elements(); ++i) EXPECT_EQ(y.data<float>()[i], 0.f);
  NDArray other = RandomField({4, 4, 4}, rng);
  EXPECT_FALSE(Axpy(1.f, x, other, Stream::Cpu()).ok());
}

// Parity: the CUDA kernels evaluate the same single float operation per
// element, so results must match the CPU exactly (tolerance 0).
TEST(FieldOpsParity, CudaMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(3);
  NDArray f = RandomField({37, 29, 17, 3}, rng);
  NDArray x = RandomField({37, 29, 17, 3}, rng);
  NDArray f_dev = f.CopyTo(MemoryKind::kDevice, stream).value();
  NDArray x_dev = x.CopyTo(MemoryKind::kDevice, stream).value();
  const std::array<double, 9> m = {0.9, -0.2, 0.1, 0.3, 1.1, -0.4, 0.05, 0.2, 0.7};
  ASSERT_TRUE(ScaleComponents(f_dev, {1.5f, -0.25f, 3.f}, stream).ok());
  ASSERT_TRUE(Axpy(-0.7f, x_dev, f_dev, stream).ok());
  ASSERT_TRUE(MixComponents(f_dev, m, stream).ok());
  ASSERT_TRUE(ScaleComponents(f, {1.5f, -0.25f, 3.f}, Stream::Cpu()).ok());
  ASSERT_TRUE(Axpy(-0.7f, x, f, Stream::Cpu()).ok());
  ASSERT_TRUE(MixComponents(f, m, Stream::Cpu()).ok());
  NDArray back = f_dev.CopyTo(MemoryKind::kHost, stream).value();
  for (int64_t i = 0; i < f.num_elements(); ++i) ASSERT_EQ(back.data<float>()[i], f.data<float>()[i]) << i;
  ASSERT_TRUE(FillZero(f_dev, stream).ok());
  back = f_dev.CopyTo(MemoryKind::kHost, stream).value();
  for (int64_t i = 0; i < f.num_elements(); ++i) ASSERT_EQ(back.data<float>()[i], 0.f);
}

}  // namespace
}  // namespace registration
}  // namespace tessera
