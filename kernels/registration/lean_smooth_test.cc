// SmoothInPlaceWithScratch equals GaussianSmooth: on the CPU (same call) and
// on CUDA with a borrowed scratch (same kernels: tolerance 0) for random
// fields, plus its argument checks.
#include "kernels/registration/lean_smooth.h"

#include <gtest/gtest.h>

#include <random>

#include "common/buffer.h"
#include "common/testing/gpu_test.h"
#include "kernels/registration/gaussian_smooth.h"

namespace tessera {
namespace registration {
namespace {

NDArray RandomField(const Shape& shape, uint32_t seed) {
  NDArray a = NDArray::Allocate(shape, DType::kFloat32).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = d(rng);
  return a;
}

TEST(LeanSmoothCpu, EqualsGaussianSmooth) {
  NDArray f = RandomField({13, 11, 9, 3}, 1);
  NDArray want = f.Clone().value();
  ASSERT_TRUE(GaussianSmooth(want, &want, {1.0, 1.0, 1.0}, Stream::Cpu()).ok());
  ASSERT_TRUE(SmoothInPlaceWithScratch(f, {1.0, 1.0, 1.0}, nullptr, 0, Stream::Cpu()).ok());
  for (int64_t i = 0; i < f.num_elements(); ++i) ASSERT_EQ(f.data<float>()[i], want.data<float>()[i]);
}

TEST(LeanSmoothCuda, BorrowedScratchEqualsGaussianSmooth) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  for (const Shape& shape : {Shape{37, 29, 23, 3}, Shape{40, 30, 20}}) {
    NDArray host = RandomField(shape, 2);
    NDArray a = host.CopyTo(MemoryKind::kDevice, stream).value();
    NDArray b = host.CopyTo(MemoryKind::kDevice, stream).value();
    ASSERT_TRUE(GaussianSmooth(a, &a, {1.0, 0.5, 1.5}, stream).ok());
    NDArray scratch = NDArray::Allocate({shape[0], shape[1], shape[2]}, DType::kFloat32, MemoryKind::kDevice).value();
    EXPECT_EQ(SmoothInPlaceWithScratch(b, {1.0, 0.5, 1.5}, scratch.data<float>(), 10, stream).code(),
              absl::StatusCode::kInvalidArgument);
    ASSERT_TRUE(SmoothInPlaceWithScratch(b, {1.0, 0.5, 1.5}, scratch.data<float>(), scratch.num_elements(), stream).ok());
    NDArray ha = a.CopyTo(MemoryKind::kHost, stream).value(), hb = b.CopyTo(MemoryKind::kHost, stream).value();
    for (int64_t i = 0; i < ha.num_elements(); ++i) ASSERT_EQ(ha.data<float>()[i], hb.data<float>()[i]) << i;
  }
}

}  // namespace
}  // namespace registration
}  // namespace tessera
