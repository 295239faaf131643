#include "common/array_stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "common/testing/gpu_test.h"

namespace tessera {
namespace {

template <typename T>
NDArray RandomArray(const Shape& shape, std::mt19937& rng, double lo, double hi) {
  NDArray a = NDArray::Allocate(shape, DTypeOf<T>::value).value();
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<T>()[i] = static_cast<T>(dist(rng));
  return a;
}

TEST(ArrayStatsCpu, MatchesClosedForm) {
  NDArray a = NDArray::Allocate({4}, DType::kFloat32).value();
  const float values[] = {1.f, 2.f, 3.f, 6.f};
  std::copy(values, values + 4, a.data<float>());
  ArrayStats s = ComputeArrayStatsCpu(a);
  EXPECT_EQ(s.count, 4);
  EXPECT_EQ(s.nonfinite_count, 0);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 6);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.stddev, std::sqrt(3.5));  // (4+1+0+9)/4
}

TEST(ArrayStatsCpu, CountsNonFiniteAndSkipsThem) {
  NDArray a = NDArray::Allocate({5}, DType::kFloat64).value();
  const double values[] = {2.0, std::numeric_limits<double>::quiet_NaN(), 4.0,
                           std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity()};
  std::copy(values, values + 5, a.data<double>());
  ArrayStats s = ComputeArrayStatsCpu(a);
  EXPECT_EQ(s.nonfinite_count, 3);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_DOUBLE_EQ(s.min, 2);
  EXPECT_DOUBLE_EQ(s.max, 4);
}

TEST(ArrayStats, CpuStreamDispatchesToReference) {
  std::mt19937 rng(7);
  NDArray a = RandomArray<int16_t>({17, 9, 5}, rng, -300, 900);
  ArrayStats via_api = ComputeArrayStats(a, Stream::Cpu()).value();
  ArrayStats ref = ComputeArrayStatsCpu(a);
  EXPECT_EQ(via_api.mean, ref.mean);
  EXPECT_EQ(via_api.stddev, ref.stddev);
}

// Parity: fused single-pass CUDA reduction vs the two-pass CPU reference, on
// random data of several dtypes and sizes (including sizes that do not fill a
// block and ones with many blocks). Tolerance: relative 1e-9 on mean/stddev
// (both accumulate in double; they differ only in summation order), exact
// min/max/counts.
TEST(ArrayStatsParity, CudaMatchesCpuOnRandomInputs) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(1234);
  const Shape shapes[] = {{1}, {255}, {257, 3}, {181, 217, 181}, {64, 64, 64, 3}};
  for (const Shape& shape : shapes) {
    for (int variant = 0; variant < 3; ++variant) {
      NDArray a = variant == 0   ? RandomArray<float>(shape, rng, -5, 1000)
                  : variant == 1 ? RandomArray<uint8_t>(shape, rng, 1, 255)
                                 : RandomArray<double>(shape, rng, -1e6, 1e6);
      if (variant == 0 && a.num_elements() > 10) {  // sprinkle NaN/Inf
        a.data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
        a.data<float>()[a.num_elements() - 1] = -std::numeric_limits<float>::infinity();
      }
      ArrayStats ref = ComputeArrayStatsCpu(a);
      auto got = ComputeArrayStats(a, stream);
      ASSERT_TRUE(got.ok()) << got.status();
      SCOPED_TRACE(ShapeToString(shape) + " variant " + std::to_string(variant));
      EXPECT_EQ(got->count, ref.count);
      EXPECT_EQ(got->nonfinite_count, ref.nonfinite_count);
      EXPECT_EQ(got->min, ref.min);
      EXPECT_EQ(got->max, ref.max);
      EXPECT_NEAR(got->mean, ref.mean, 1e-9 * std::max(1.0, std::abs(ref.mean)));
      EXPECT_NEAR(got->stddev, ref.stddev, 1e-9 * std::max(1.0, ref.stddev));
    }
  }
}

TEST(ArrayStatsParity, DeviceResidentArray) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(99);
  NDArray host = RandomArray<float>({100, 100, 100}, rng, 0.5, 2.0);
  NDArray device = host.CopyTo(MemoryKind::kDevice, stream).value();
  ArrayStats got = ComputeArrayStats(device, stream).value();
  ArrayStats ref = ComputeArrayStatsCpu(host);
  EXPECT_NEAR(got.mean, ref.mean, 1e-9);
  EXPECT_NEAR(got.stddev, ref.stddev, 1e-9);
  // A device array with a CPU stream is a usage error, not a crash.
  EXPECT_EQ(ComputeArrayStats(device, Stream::Cpu()).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tessera
