// CUDA NUFFT against the CPU NUFFT (same kernel, same grid: rel l2 <= 1e-5
// in float at tol 1e-6, 1e-12 in double) and against the NUDFT (4 x tol), on
// uniform and clustered points (the clustered set makes bins of > 1024 points,
// split into several spreading blocks); tile, global-atomic (wide 3-D double
// kernels) and deterministic-gather spreading; bit-identical deterministic runs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "common/device.h"
#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/nufft/nufft.h"
#include "kernels/reconstruction/nufft/nufft_test_util.h"

namespace tessera {
namespace recon {
namespace nufft {
namespace {

using ::tessera::testing::DeviceArray;
using testing::PointSet;
using testing::RandomComplex;
using testing::RelL2;

// Uniform points, plus (clustered) a dense blob of half of them near 0.
template <typename T>
PointSet<T> Points(int dim, int64_t m, bool clustered, uint32_t seed) {
  PointSet<T> p = testing::RandomPoints<T>(dim, m, seed);
  if (clustered) {
    std::mt19937 rng(seed + 100);
    std::normal_distribution<double> g(0.0, 0.05);
    for (int64_t j = 0; j < m / 2; ++j) {
      p.x[j] = static_cast<T>(g(rng));
      p.y[j] = static_cast<T>(g(rng));
      if (dim == 3) p.z[j] = static_cast<T>(g(rng));
    }
  }
  return p;
}

struct Result {
  double vs_cpu = 1e9;
  double vs_nudft = 1e9;
};

template <typename T>
Result Compare(NufftType type, int dim, double tol, ExecutionMode mode, bool clustered, bool check_nudft) {
  const std::array<int64_t, 3> modes = dim == 2 ? std::array<int64_t, 3>{64, 48, 1} : std::array<int64_t, 3>{20, 16, 12};
  const int64_t m = dim == 2 ? 20000 : 8000;
  const int nt = 3;
  const int64_t nmodes = modes[0] * modes[1] * modes[2];
  const PointSet<T> pts = Points<T>(dim, m, clustered, 7 + dim);
  NufftOptions o;
  o.tolerance = tol;
  o.ntransforms = nt;
  o.mode = mode;
  const int64_t in_n = (type == NufftType::kType1 ? m : nmodes) * nt;
  const int64_t out_n = (type == NufftType::kType1 ? nmodes : m) * nt;
  const auto in = RandomComplex<T>(in_n, 11);

  const Stream cpu = Stream::Cpu();
  auto cplan = NufftPlan<T>::Create(cpu, type, modes, o);
  EXPECT_TRUE(cplan.ok()) << cplan.status();
  EXPECT_TRUE((*cplan)->SetPoints(m, pts.x.data(), pts.y.data(), pts.zp()).ok());
  std::vector<std::complex<T>> cpu_in = in, cpu_out(out_n);
  EXPECT_TRUE((type == NufftType::kType1 ? (*cplan)->Execute(cpu_in.data(), cpu_out.data())
                                         : (*cplan)->Execute(cpu_out.data(), cpu_in.data()))
                  .ok());

  auto stream = Stream::Create(Backend::kCuda);
  EXPECT_TRUE(stream.ok());
  auto gplan = NufftPlan<T>::Create(*stream, type, modes, o);
  EXPECT_TRUE(gplan.ok()) << gplan.status();
  auto dx = DeviceArray<T>::FromHost(pts.x, *stream);
  auto dy = DeviceArray<T>::FromHost(pts.y, *stream);
  auto dz = DeviceArray<T>::FromHost(dim == 3 ? pts.z : std::vector<T>(1), *stream);
  const absl::Status sp = (*gplan)->SetPoints(m, dx.data(), dy.data(), dim == 3 ? dz.data() : nullptr);
  EXPECT_TRUE(sp.ok()) << sp;
  auto din = DeviceArray<std::complex<T>>::FromHost(in, *stream);
  auto dout = DeviceArray<std::complex<T>>::Allocate(out_n, *stream);
  dout.Poison(std::complex<T>(NAN, NAN));
  const absl::Status ex = type == NufftType::kType1 ? (*gplan)->Execute(din.data(), dout.data())
                                                    : (*gplan)->Execute(dout.data(), din.data());
  EXPECT_TRUE(ex.ok()) << ex;
  const auto gpu_out = dout.Download();
  Result r;
  r.vs_cpu = RelL2(gpu_out, cpu_out);
  if (check_nudft) {
    const int sign = type == NufftType::kType1 ? 1 : -1;
    r.vs_nudft = RelL2(gpu_out, testing::ReferenceNudft(type, modes, pts, sign, nt, testing::ToDouble(in)));
  }
  return r;
}

TEST(NufftCudaTest, FloatMatchesCpuAndNudft) {
  TESSERA_SKIP_WITHOUT_GPU();
  for (int dim : {2, 3}) {
    for (NufftType type : {NufftType::kType1, NufftType::kType2}) {
      for (bool clustered : {false, true}) {
        const Result r = Compare<float>(type, dim, 1e-6, ExecutionMode::kDefault, clustered, !clustered);
        const std::string what = "dim " + std::to_string(dim) + " type " + std::to_string(static_cast<int>(type)) +
                                 (clustered ? " clustered" : " uniform");
        EXPECT_LE(r.vs_cpu, 1e-5) << what;
        if (!clustered) EXPECT_LE(r.vs_nudft, 4e-6) << what;
      }
    }
  }
}

TEST(NufftCudaTest, DoubleMatchesCpuAndNudft) {
  TESSERA_SKIP_WITHOUT_GPU();
  for (int dim : {2, 3}) {  // 3-D at 1e-12 (w = 13) spreads with global atomics
    for (NufftType type : {NufftType::kType1, NufftType::kType2}) {
      const Result r = Compare<double>(type, dim, 1e-12, ExecutionMode::kDefault, true, false);
      EXPECT_LE(r.vs_cpu, 1e-12) << dim;
      const Result u = Compare<double>(type, dim, 1e-9, ExecutionMode::kDefault, false, true);
      EXPECT_LE(u.vs_nudft, 4e-9) << dim;
    }
  }
}

TEST(NufftCudaTest, DeterministicGatherIsAccurate) {
  TESSERA_SKIP_WITHOUT_GPU();
  for (int dim : {2, 3}) {
    const Result f = Compare<float>(NufftType::kType1, dim, 1e-5, ExecutionMode::kDeterministic, false, true);
    EXPECT_LE(f.vs_cpu, 1e-5) << dim;
    EXPECT_LE(f.vs_nudft, 4e-5) << dim;
    const Result d = Compare<double>(NufftType::kType1, dim, 1e-12, ExecutionMode::kDeterministic, true, false);
    EXPECT_LE(d.vs_cpu, 1e-12) << dim;
  }
}

TEST(NufftCudaTest, DeterministicRunsAreBitIdentical) {
  TESSERA_SKIP_WITHOUT_GPU();
  for (int dim : {2, 3}) {
    const std::array<int64_t, 3> modes = dim == 2 ? std::array<int64_t, 3>{128, 128, 1} : std::array<int64_t, 3>{32, 32, 32};
    const int64_t m = 200000, nmodes = modes[0] * modes[1] * modes[2];
    const PointSet<float> pts = Points<float>(dim, m, true, 3);
    auto stream = Stream::Create(Backend::kCuda);
    ASSERT_TRUE(stream.ok());
    NufftOptions o;
    o.tolerance = 1e-5;
    o.mode = ExecutionMode::kDeterministic;
    auto dx = DeviceArray<float>::FromHost(pts.x, *stream);
    auto dy = DeviceArray<float>::FromHost(pts.y, *stream);
    auto dz = DeviceArray<float>::FromHost(dim == 3 ? pts.z : std::vector<float>(1), *stream);
    auto dc = DeviceArray<std::complex<float>>::FromHost(RandomComplex<float>(m, 4), *stream);
    std::vector<std::vector<std::complex<float>>> runs;
    for (int run = 0; run < 2; ++run) {
      auto plan = NufftPlan<float>::Create(*stream, NufftType::kType1, modes, o);
      ASSERT_TRUE(plan.ok());
      ASSERT_TRUE((*plan)->SetPoints(m, dx.data(), dy.data(), dim == 3 ? dz.data() : nullptr).ok());
      auto df = DeviceArray<std::complex<float>>::Allocate(nmodes, *stream);
      ASSERT_TRUE((*plan)->Execute(dc.data(), df.data()).ok());
      runs.push_back(df.Download());
    }
    EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), nmodes * sizeof(std::complex<float>)), 0) << dim;
  }
}

TEST(NufftCudaTest, NonFiniteDeviceCoordinateIsNamed) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  auto plan = NufftPlan<float>::Create(*stream, NufftType::kType2, {16, 16, 1});
  ASSERT_TRUE(plan.ok());
  auto dx = DeviceArray<float>::FromHost({0.1f, 0.2f, 0.3f}, *stream);
  auto dy = DeviceArray<float>::FromHost({0.1f, NAN, 0.3f}, *stream);
  const absl::Status s = (*plan)->SetPoints(3, dx.data(), dy.data(), nullptr);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("y[1]"), std::string::npos) << s;
}

}  // namespace
}  // namespace nufft
}  // namespace recon
}  // namespace tessera
