// CPU NUFFT against the direct NUDFT: the 4 x tolerance contract over
// tolerances, types, dimensions, upsampling factors and both precisions;
// exact adjointness of type 1 and type 2; argument checks.
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/device.h"
#include "kernels/reconstruction/nufft/nufft.h"
#include "kernels/reconstruction/nufft/nufft_test_util.h"

namespace tessera {
namespace recon {
namespace nufft {
namespace {

using testing::PointSet;
using testing::RandomComplex;
using testing::RandomPoints;
using testing::ReferenceNudft;
using testing::RelL2;
using testing::ToDouble;

std::array<int64_t, 3> TestModes(int dim) {
  return dim == 2 ? std::array<int64_t, 3>{24, 20, 1} : std::array<int64_t, 3>{10, 12, 8};
}

// Relative l2 error of the CPU plan against the NUDFT for one configuration.
template <typename T>
double Error(NufftType type, int dim, double tol, double sigma, int ntransforms, uint32_t seed) {
  const std::array<int64_t, 3> modes = TestModes(dim);
  const int64_t m = dim == 2 ? 600 : 400, nmodes = modes[0] * modes[1] * modes[2];
  const PointSet<T> pts = RandomPoints<T>(dim, m, seed);
  NufftOptions options;
  options.tolerance = tol;
  options.upsampling = sigma;
  options.ntransforms = ntransforms;
  const Stream cpu = Stream::Cpu();
  auto plan = NufftPlan<T>::Create(cpu, type, modes, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  if (!plan.ok()) return 1e9;
  EXPECT_TRUE((*plan)->SetPoints(m, pts.x.data(), pts.y.data(), pts.zp()).ok());
  const int sign = type == NufftType::kType1 ? 1 : -1;
  const int64_t in_size = (type == NufftType::kType1 ? m : nmodes) * ntransforms;
  const int64_t out_size = (type == NufftType::kType1 ? nmodes : m) * ntransforms;
  std::vector<std::complex<T>> in = RandomComplex<T>(in_size, seed + 1);
  std::vector<std::complex<T>> out(out_size, std::complex<T>(NAN, NAN));
  const absl::Status st = type == NufftType::kType1 ? (*plan)->Execute(in.data(), out.data())
                                                    : (*plan)->Execute(out.data(), in.data());
  EXPECT_TRUE(st.ok()) << st;
  const auto ref = ReferenceNudft(type, modes, pts, sign, ntransforms, ToDouble(in));
  return RelL2(out, ref);
}

template <typename T>
void CheckContract(const std::vector<double>& tolerances, double sigma) {
  for (double tol : tolerances) {
    for (NufftType type : {NufftType::kType1, NufftType::kType2}) {
      for (int dim : {2, 3}) {
        const double err = Error<T>(type, dim, tol, sigma, 3, 17 + dim);
        EXPECT_LE(err, 4 * tol) << "type " << static_cast<int>(type) << " dim " << dim << " tol " << tol << " sigma "
                                << sigma << " (" << sizeof(T) * 8 << "-bit)";
        // The error also tracks the request (not far below it: the width is not oversized).
        EXPECT_GE(err, 1e-4 * tol) << "tol " << tol;
      }
    }
  }
}

TEST(NufftCpuTest, FloatMeetsToleranceSigma2) { CheckContract<float>({1e-2, 1e-3, 1e-4, 1e-5, 1e-6}, 2.0); }
TEST(NufftCpuTest, FloatMeetsToleranceSigma125) {
  CheckContract<float>({1e-2, 1e-3, 1e-4, 1e-5}, 1.25);
  // At 1e-6 single-precision rounding of the fine grid, amplified by the
  // deconvolution near the band edge, dominates (nufft.h): a looser bound.
  for (NufftType type : {NufftType::kType1, NufftType::kType2}) {
    EXPECT_LE(Error<float>(type, 2, 1e-6, 1.25, 3, 19), 3e-5);
  }
}
TEST(NufftCpuTest, DoubleMeetsToleranceSigma2) {
  CheckContract<double>({1e-2, 1e-3, 1e-5, 1e-7, 1e-9, 1e-12}, 2.0);
}
TEST(NufftCpuTest, DoubleMeetsToleranceSigma125) { CheckContract<double>({1e-2, 1e-3, 1e-5, 1e-7, 1e-9}, 1.25); }

// Type 1 (+1) is the exact adjoint of type 2 (-1) with the same kernel: same
// kernel values, the transposed FFT and the same real deconvolution.
template <typename T>
void CheckAdjoint(int dim, double bound) {
  const std::array<int64_t, 3> modes = TestModes(dim);
  const int64_t m = 300, nmodes = modes[0] * modes[1] * modes[2];
  const PointSet<T> pts = RandomPoints<T>(dim, m, 5);
  NufftOptions options;
  options.tolerance = 1e-2;  // a loose kernel: adjointness must not depend on accuracy
  options.ntransforms = 2;
  const Stream cpu = Stream::Cpu();
  auto t1 = NufftPlan<T>::Create(cpu, NufftType::kType1, modes, options);
  auto t2 = NufftPlan<T>::Create(cpu, NufftType::kType2, modes, options);
  ASSERT_TRUE(t1.ok() && t2.ok());
  ASSERT_TRUE((*t1)->SetPoints(m, pts.x.data(), pts.y.data(), pts.zp()).ok());
  ASSERT_TRUE((*t2)->SetPoints(m, pts.x.data(), pts.y.data(), pts.zp()).ok());
  auto x = RandomComplex<T>(nmodes * 2, 8), y = RandomComplex<T>(m * 2, 9);
  std::vector<std::complex<T>> ax(m * 2), ahy(nmodes * 2);
  ASSERT_TRUE((*t2)->Execute(ax.data(), x.data()).ok());
  ASSERT_TRUE((*t1)->Execute(y.data(), ahy.data()).ok());
  const std::complex<double> lhs = testing::Dot(ax, y), rhs = testing::Dot(x, ahy);
  EXPECT_LE(std::abs(lhs - rhs) / std::abs(lhs), bound) << "dim " << dim;
}

TEST(NufftCpuTest, Type1IsAdjointOfType2) {
  CheckAdjoint<float>(2, 1e-5);
  CheckAdjoint<float>(3, 1e-5);
  CheckAdjoint<double>(2, 1e-13);
  CheckAdjoint<double>(3, 1e-13);
}

TEST(NufftCpuTest, ZeroPointsGiveZeroModes) {
  const Stream cpu = Stream::Cpu();
  auto plan = NufftPlan<float>::Create(cpu, NufftType::kType1, {8, 8, 1});
  ASSERT_TRUE(plan.ok());
  ASSERT_TRUE((*plan)->SetPoints(0, nullptr, nullptr, nullptr).ok());
  std::vector<std::complex<float>> f(64, {NAN, NAN});
  ASSERT_TRUE((*plan)->Execute(nullptr, f.data()).ok());
  for (const auto& v : f) EXPECT_EQ(v, std::complex<float>(0, 0));
}

void ExpectInvalid(const absl::Status& s, const std::string& needle) {
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(needle), std::string::npos) << s.message() << " lacks " << needle;
}

TEST(NufftCpuTest, BadArgumentsNameTheField) {
  const Stream cpu = Stream::Cpu();
  NufftOptions o;
  o.tolerance = 0.5;
  ExpectInvalid(NufftPlan<float>::Create(cpu, NufftType::kType1, {8, 8, 1}, o).status(), "tolerance");
  o.tolerance = 1e-20;
  ExpectInvalid(NufftPlan<float>::Create(cpu, NufftType::kType1, {8, 8, 1}, o).status(), "tolerance");
  o = NufftOptions();
  o.upsampling = 1.5;
  ExpectInvalid(NufftPlan<float>::Create(cpu, NufftType::kType1, {8, 8, 1}, o).status(), "upsampling");
  o = NufftOptions();
  o.sign = 2;
  ExpectInvalid(NufftPlan<float>::Create(cpu, NufftType::kType2, {8, 8, 1}, o).status(), "sign");
  o = NufftOptions();
  o.ntransforms = 0;
  ExpectInvalid(NufftPlan<float>::Create(cpu, NufftType::kType2, {8, 8, 1}, o).status(), "ntransforms");
  ExpectInvalid(NufftPlan<double>::Create(cpu, NufftType::kType1, {8, 1, 1}).status(), "modes[1]");
  ExpectInvalid(NufftPlan<double>::Create(cpu, NufftType::kType1, {1, 8, 1}).status(), "modes[0]");
  ExpectInvalid(NufftPlan<double>::Create(cpu, NufftType::kType1, {8, 8, 0}).status(), "modes[2]");

  auto plan = NufftPlan<float>::Create(cpu, NufftType::kType2, {8, 8, 1});
  ASSERT_TRUE(plan.ok());
  std::vector<float> x = {0.1f, 0.2f, 0.3f, NAN}, y = {0.f, 1.f, 2.f, 3.f};
  ExpectInvalid((*plan)->SetPoints(4, x.data(), y.data(), nullptr), "x[3]");
  x[3] = 0.f;
  y[1] = INFINITY;
  ExpectInvalid((*plan)->SetPoints(4, x.data(), y.data(), nullptr), "y[1]");
  ExpectInvalid((*plan)->SetPoints(4, x.data(), nullptr, nullptr), "y is null");
  ExpectInvalid((*plan)->SetPoints(-1, x.data(), y.data(), nullptr), "points");
}

TEST(NufftCpuTest, ReportsKernelInfo) {
  const Stream cpu = Stream::Cpu();
  NufftOptions o;
  o.tolerance = 1e-5;
  auto plan = NufftPlan<float>::Create(cpu, NufftType::kType2, {256, 256, 1}, o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ((*plan)->kernel_info().width, 6);
  EXPECT_EQ((*plan)->kernel_info().fine_grid, (std::array<int64_t, 3>{512, 512, 1}));
  EXPECT_EQ((*plan)->options().sign, -1);
  EXPECT_EQ((*plan)->dim(), 2);
}

}  // namespace
}  // namespace nufft
}  // namespace recon
}  // namespace tessera
