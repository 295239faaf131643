// bspline_field.h: the CPU reference against the B-spline's defining
// properties (partition of unity, exact linear fields, exact subdivision),
// adjointness <B c, g> == <c, B^T g> to 1e-5 relative, argument errors, and
// CUDA == CPU on random non-zero inputs (relative L2 <= 1e-5; skipped
// without a GPU).
#include "kernels/registration/bspline_field.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"

namespace tessera {
namespace registration {
namespace {

BsplineGrid Grid(std::array<int64_t, 3> voxels, std::array<double, 3> s) {
  BsplineGrid g;
  for (int a = 0; a < 3; ++a) g[a] = MakeBsplineAxis(voxels[a], s[a]).value();
  return g;
}

NDArray Random(const Shape& shape, uint32_t seed) {
  NDArray a = NDArray::Allocate(shape, DType::kFloat32).value();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < a.num_elements(); ++i) a.data<float>()[i] = u(rng) + (u(rng) > 0 ? 0.5f : -0.5f);
  return a;
}

Shape ControlShape(const BsplineGrid& g, int64_t c) { return {g[0].controls, g[1].controls, g[2].controls, c}; }
Shape FieldShape(const BsplineGrid& g, int64_t c) { return {g[0].voxels, g[1].voxels, g[2].voxels, c}; }

double Dot(const NDArray& a, const NDArray& b) {
  double s = 0;
  for (int64_t i = 0; i < a.num_elements(); ++i) s += double(a.data<float>()[i]) * b.data<float>()[i];
  return s;
}

std::vector<float> Host(const NDArray& a) {
  return std::vector<float>(a.data<float>(), a.data<float>() + a.num_elements());
}

TEST(BsplineAxis, ControlCountCoversTheVoxels) {
  EXPECT_EQ(MakeBsplineAxis(91, 5.0)->controls, 22);   // 18 intervals + 4
  EXPECT_EQ(MakeBsplineAxis(91, 2.5)->controls, 40);
  EXPECT_EQ(MakeBsplineAxis(1, 4.0)->controls, 4);
  EXPECT_EQ(MakeBsplineAxis(10, 100.0)->controls, 4);
  EXPECT_EQ(MakeBsplineAxis(0, 4.0).status().code(), absl::StatusCode::kInvalidArgument);
  auto bad = MakeBsplineAxis(10, 0.0);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(bad.status().message()).find("voxels per control"), std::string::npos);
  EXPECT_FALSE(MakeBsplineAxis(10, std::nan("")).ok());
}

TEST(BsplineCpu, ConstantAndLinearFieldsAreExact) {
  const BsplineGrid g = Grid({23, 17, 11}, {3.7, 2.0, 4.4});
  NDArray c = NDArray::Allocate(ControlShape(g, 2), DType::kFloat32).value();
  const int64_t mv = c.num_elements() / 2;
  // Component 0 constant, component 1 linear in voxel coordinates: cubic
  // B-splines reproduce both exactly.
  for (int64_t k = 0; k < g[2].controls; ++k) {
    for (int64_t j = 0; j < g[1].controls; ++j) {
      for (int64_t i = 0; i < g[0].controls; ++i) {
        const int64_t e = i + g[0].controls * (j + g[1].controls * k);
        c.data<float>()[e] = 0.75f;
        c.data<float>()[mv + e] = static_cast<float>(0.1 * (i - 1) * 3.7 - 0.05 * (j - 1) * 2.0 + 0.02 * (k - 1) * 4.4 + 1);
      }
    }
  }
  NDArray u = NDArray::Allocate(FieldShape(g, 2), DType::kFloat32).value();
  ASSERT_TRUE(BsplineEvaluate(g, c, &u, Stream::Cpu()).ok());
  const int64_t nv = u.num_elements() / 2;
  for (int64_t z = 0; z < 11; ++z) {
    for (int64_t y = 0; y < 17; ++y) {
      for (int64_t x = 0; x < 23; ++x) {
        const int64_t e = x + 23 * (y + 17 * z);
        EXPECT_NEAR(u.data<float>()[e], 0.75f, 1e-6) << x << " " << y << " " << z;
        EXPECT_NEAR(u.data<float>()[nv + e], 0.1 * x - 0.05 * y + 0.02 * z + 1, 2e-6) << x << " " << y << " " << z;
      }
    }
  }
}

TEST(BsplineCpu, AdjointMatchesEvaluate) {
  // Non-integer spacings, an axis narrower than one interval, C = 3.
  for (const auto& [voxels, s] : std::vector<std::pair<std::array<int64_t, 3>, std::array<double, 3>>>{
           {{31, 26, 19}, {3.7, 5.0, 2.3}}, {{40, 9, 1}, {1.0, 12.5, 4.0}}}) {
    const BsplineGrid g = Grid(voxels, s);
    NDArray c = Random(ControlShape(g, 3), 1), gu = Random(FieldShape(g, 3), 2);
    NDArray bc = NDArray::Allocate(FieldShape(g, 3), DType::kFloat32).value();
    NDArray btg = NDArray::Allocate(ControlShape(g, 3), DType::kFloat32).value();
    ASSERT_TRUE(BsplineEvaluate(g, c, &bc, Stream::Cpu()).ok());
    ASSERT_TRUE(BsplineAdjoint(g, gu, &btg, Stream::Cpu()).ok());
    const double lhs = Dot(bc, gu), rhs = Dot(c, btg);
    EXPECT_NEAR(lhs, rhs, 1e-5 * std::abs(lhs)) << lhs << " vs " << rhs;
    EXPECT_GT(std::abs(lhs), 1.0);  // not a trivial zero
  }
}

TEST(BsplineCpu, RefineKeepsTheSpline) {
  // The same 40 voxels at 6 and 3 voxels per control.
  const BsplineGrid coarse = Grid({40, 33, 14}, {6.0, 5.0, 4.0});
  const BsplineGrid fine = Grid({40, 33, 14}, {3.0, 2.5, 2.0});
  NDArray c = Random(ControlShape(coarse, 3), 3);
  NDArray f = NDArray::Allocate(ControlShape(fine, 3), DType::kFloat32).value();
  ASSERT_TRUE(BsplineRefine(c, &f, Stream::Cpu()).ok());
  NDArray uc = NDArray::Allocate(FieldShape(coarse, 3), DType::kFloat32).value();
  NDArray uf = NDArray::Allocate(FieldShape(fine, 3), DType::kFloat32).value();
  ASSERT_TRUE(BsplineEvaluate(coarse, c, &uc, Stream::Cpu()).ok());
  ASSERT_TRUE(BsplineEvaluate(fine, f, &uf, Stream::Cpu()).ok());
  EXPECT_LT(testing::RelL2(Host(uf), Host(uc)), 1e-6);
}

TEST(BsplineCpu, RejectsMismatchedArrays) {
  const BsplineGrid g = Grid({10, 10, 10}, {3.0, 3.0, 3.0});
  NDArray c = Random({g[0].controls, g[1].controls, g[2].controls + 1, 3}, 4);
  NDArray u = NDArray::Allocate(FieldShape(g, 3), DType::kFloat32).value();
  absl::Status s = BsplineEvaluate(g, c, &u, Stream::Cpu());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("coeffs"), std::string::npos) << s;
  BsplineGrid wrong = g;
  wrong[1].controls = 3;
  s = BsplineAdjoint(wrong, u, &c, Stream::Cpu());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("axis 1"), std::string::npos) << s;
  NDArray small = Random({3, 5, 5, 3}, 5);
  EXPECT_EQ(BsplineRefine(small, &c, Stream::Cpu()).code(), absl::StatusCode::kInvalidArgument);
}

TEST(BsplineParity, CudaMatchesCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  Stream stream = Stream::Create(Backend::kCuda).value();
  const BsplineGrid g = Grid({67, 45, 38}, {4.3, 2.0, 7.5});
  const BsplineGrid fine = Grid({67, 45, 38}, {2.15, 1.0, 3.75});
  NDArray c = Random(ControlShape(g, 3), 6), gu = Random(FieldShape(g, 3), 7);
  NDArray u = NDArray::Allocate(FieldShape(g, 3), DType::kFloat32).value();
  NDArray gc = NDArray::Allocate(ControlShape(g, 3), DType::kFloat32).value();
  NDArray cf = NDArray::Allocate(ControlShape(fine, 3), DType::kFloat32).value();
  ASSERT_TRUE(BsplineEvaluate(g, c, &u, Stream::Cpu()).ok());
  ASSERT_TRUE(BsplineAdjoint(g, gu, &gc, Stream::Cpu()).ok());
  ASSERT_TRUE(BsplineRefine(c, &cf, Stream::Cpu()).ok());
  NDArray c_dev = c.CopyTo(MemoryKind::kDevice, stream).value();
  NDArray gu_dev = gu.CopyTo(MemoryKind::kDevice, stream).value();
  NDArray u_dev = NDArray::Allocate(FieldShape(g, 3), DType::kFloat32, MemoryKind::kDevice).value();
  NDArray gc_dev = NDArray::Allocate(ControlShape(g, 3), DType::kFloat32, MemoryKind::kDevice).value();
  NDArray cf_dev = NDArray::Allocate(ControlShape(fine, 3), DType::kFloat32, MemoryKind::kDevice).value();
  Workspace workspace;  // reused across calls, as the stage does
  ASSERT_TRUE(BsplineEvaluate(g, c_dev, &u_dev, stream, &workspace).ok());
  ASSERT_TRUE(BsplineAdjoint(g, gu_dev, &gc_dev, stream, &workspace).ok());
  ASSERT_TRUE(BsplineRefine(c_dev, &cf_dev, stream, &workspace).ok());
  ASSERT_TRUE(stream.Synchronize().ok());
  EXPECT_LT(testing::RelL2(Host(u_dev.CopyTo(MemoryKind::kHost, stream).value()), Host(u)), 1e-5);
  EXPECT_LT(testing::RelL2(Host(gc_dev.CopyTo(MemoryKind::kHost, stream).value()), Host(gc)), 1e-5);
  EXPECT_LT(testing::RelL2(Host(cf_dev.CopyTo(MemoryKind::kHost, stream).value()), Host(cf)), 1e-5);
}

}  // namespace
}  // namespace registration
}  // namespace tessera
