#include "kernels/registration/jacobian.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "common/testing/gpu_test.h"
#include "kernels/registration/gaussian_smooth.h"
#include "kernels/registration/reg_testing.h"

namespace tessera {
namespace registration {
namespace {

using reg_testing::HostFloat;
using reg_testing::PoisonedDevice;
using reg_testing::RandomUniform;
using reg_testing::ToDevice;
using reg_testing::ToHost;

float& U(NDArray& u, int64_t i, int64_t j, int64_t k, int c) {
  return u.data<float>()[i + u.dim(0) * (j + u.dim(1) * (k + u.dim(2) * c))];
}

double Det3(const double A[3][3]) {
  return A[0][0] * (A[1][1] * A[2][2] - A[1][2] * A[2][1]) - A[0][1] * (A[1][0] * A[2][2] - A[1][2] * A[2][0]) +
         A[0][2] * (A[1][0] * A[2][1] - A[1][1] * A[2][0]);
}

TEST(JacobianCpu, IdentityAndLinearFieldsEverywhere) {
  const Shape shape = {9, 8, 7, 3};
  NDArray u = HostFloat(shape);
  NDArray det = HostFloat({9, 8, 7}, std::nanf(""));
  JacobianSummary s = JacobianDeterminant(u, &det, Stream::Cpu()).value();
  EXPECT_EQ(s.voxels, 9 * 8 * 7);
  EXPECT_EQ(s.nonpositive, 0);
  EXPECT_EQ(s.min_det, 1.0);
  EXPECT_EQ(s.max_det, 1.0);
  // u = A x: differences are exact at borders too, det = det(I + A) everywhere.
  const double A[3][3] = {{0.2, -0.1, 0.05}, {0.3, -0.4, 0.1}, {0.0, 0.15, 0.25}};
  for (int64_t k = 0; k < 7; ++k)
    for (int64_t j = 0; j < 8; ++j)
      for (int64_t i = 0; i < 9; ++i)
        for (int c = 0; c < 3; ++c) U(u, i, j, k, c) = float(A[c][0] * i + A[c][1] * j + A[c][2] * k);
  const double IA[3][3] = {{1.2, -0.1, 0.05}, {0.3, 0.6, 0.1}, {0.0, 0.15, 1.25}};
  s = JacobianDeterminant(u, &det, Stream::Cpu()).value();
  for (int64_t v = 0; v < det.num_elements(); ++v) ASSERT_NEAR(det.data<float>()[v], Det3(IA), 1e-5);
  EXPECT_NEAR(s.min_det, Det3(IA), 1e-5);
  // The same field in normalised units gives the same determinant.
  NDArray un = HostFloat(shape);
  for (int c = 0; c < 3; ++c) {
    const double to_norm = 2.0 / double(shape[c] - 1);
    for (int64_t v = 0; v < 9 * 8 * 7; ++v) un.data<float>()[v + c * 504] = float(u.data<float>()[v + c * 504] * to_norm);
  }
  NDArray detn = HostFloat({9, 8, 7});
  ASSERT_TRUE(JacobianDeterminant(un, &detn, Stream::Cpu(), DisplacementUnits::kNormalized).ok());
  for (int64_t v = 0; v < det.num_elements(); ++v) ASSERT_NEAR(detn.data<float>()[v], Det3(IA), 1e-5);
}

TEST(JacobianCpu, BorderConventionAndFoldCount) {
  // u_x = c x^2: central differences give 1 + 2 c x inside; one-sided at the
  // borders: 1 + c at x = 0 and 1 + c (2n - 3) at x = n - 1.
  const int64_t n = 10;
  const float c = -0.08f;
  NDArray u = HostFloat({n, 3, 2, 3});
  for (int64_t k = 0; k < 2; ++k)
    for (int64_t j = 0; j < 3; ++j)
      for (int64_t i = 0; i < n; ++i) U(u, i, j, k, 0) = c * i * i;
  NDArray det = HostFloat({n, 3, 2});
  JacobianSummary s = JacobianDeterminant(u, &det, Stream::Cpu()).value();
  for (int64_t i = 1; i < n - 1; ++i) EXPECT_NEAR(det.data<float>()[i], 1 + 2 * c * i, 1e-5) << i;
  EXPECT_NEAR(det.data<float>()[0], 1 + c, 1e-6);
  EXPECT_NEAR(det.data<float>()[n - 1], 1 + c * (2 * n - 3), 1e-5);
  // 1 + 2 c x <= 0 for x >= 6.25 (x = 7, 8) plus the border x = 9 (1 - 0.08 * 17 < 0): 3 per row, 6 rows.
  EXPECT_EQ(s.nonpositive, 3 * 6);
  EXPECT_NEAR(s.min_det, 1 + c * 17, 1e-5);
  // Summary only.
  EXPECT_EQ(JacobianDeterminant(u, nullptr, Stream::Cpu())->nonpositive, 18);
}

TEST(Jacobian, RejectsBadArguments) {
  NDArray u = HostFloat({4, 4, 4, 2});
  EXPECT_EQ(JacobianDeterminant(u, nullptr, Stream::Cpu()).status().code(), absl::StatusCode::kInvalidArgument);
  NDArray v = HostFloat({4, 4, 4, 3}), det = HostFloat({4, 4, 5});
  EXPECT_EQ(JacobianDeterminant(v, &det, Stream::Cpu()).status().code(), absl::StatusCode::kInvalidArgument);
}

// Parity on smoothed random fields strong enough to fold in places.
// Tolerance: det within 1e-5 * max(1, |det|) (+1e-5 absolute: float products of
// O(1) entries); counts equal up to voxels whose CPU determinant is within 1e-4
// of zero.
TEST(JacobianParity, CudaMatchesCpuOnRandomFields) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  std::mt19937 rng(4);
  for (const Shape& shape : {Shape{1, 1, 1, 3}, Shape{5, 4, 3, 3}, Shape{64, 48, 40, 3}, Shape{181, 217, 181, 3}}) {
    SCOPED_TRACE(ShapeToString(shape));
    NDArray u = RandomUniform(shape, rng, -20.f, 20.f);
    ASSERT_TRUE(GaussianSmooth(u, &u, {1.5, 1.5, 1.5}, Stream::Cpu()).ok());
    const Shape vol = {shape[0], shape[1], shape[2]};
    NDArray det = HostFloat(vol);
    const JacobianSummary ref = JacobianDeterminant(u, &det, Stream::Cpu()).value();
    NDArray ddet = PoisonedDevice(vol, stream);
    const JacobianSummary got = JacobianDeterminant(ToDevice(u, stream), &ddet, stream).value();
    const NDArray hdet = ToHost(ddet, stream);
    int64_t bad = 0, near_zero = 0;
    for (int64_t v = 0; v < det.num_elements(); ++v) {
      const float r = det.data<float>()[v], g = hdet.data<float>()[v];
      bad += !(std::abs(g - r) <= 1e-5f * std::max(1.f, std::abs(r)) + 1e-5f);
      near_zero += std::abs(r) < 1e-4f;
    }
    EXPECT_EQ(bad, 0);
    EXPECT_EQ(got.voxels, ref.voxels);
    EXPECT_LE(std::abs(got.nonpositive - ref.nonpositive), near_zero);
    EXPECT_NEAR(got.min_det, ref.min_det, 1e-5 * std::max(1.0, std::abs(ref.min_det)));
    EXPECT_NEAR(got.max_det, ref.max_det, 1e-5 * std::max(1.0, std::abs(ref.max_det)));
    if (shape[0] > 10) {
      EXPECT_GT(ref.nonpositive, 0);  // the field really folds
    }
  }
}

}  // namespace
}  // namespace registration
}  // namespace tessera
