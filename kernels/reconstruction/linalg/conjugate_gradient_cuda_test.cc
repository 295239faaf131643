// CG on a CUDA stream with the bucketed SpMV against the same solve on the
// CPU backend, and bit-identical iterates run to run (deterministic SpMV and
// dots).
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/linalg/conjugate_gradient.h"
#include "kernels/reconstruction/linalg/random_problems.h"
#include "kernels/reconstruction/linalg/spmv.h"

namespace tessera {
namespace recon {
namespace linalg {
namespace {

using ::tessera::testing::DeviceArray;

TEST(ConjugateGradientCudaTest, MatchesCpuAndRepeatsBitForBit) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  const HostCsr m = RandomSpdCsr(20000, 10, 1.0, 50.0, 3);
  const std::vector<float> b = ::tessera::testing::RandomUniform<float>(m.rows, -1, 1, 4);
  CgOptions options;
  options.tolerance = 1e-6;  // error <= kappa * 1e-6 = 5e-5 for each solve
  options.zero_initial_guess = true;

  const Stream cpu = Stream::Cpu();
  auto cpu_plan = SpmvPlan::Create(m.View(), cpu);
  ASSERT_TRUE(cpu_plan.ok());
  std::vector<float> x_cpu(m.rows);
  auto cpu_result = ConjugateGradient(
      cpu, [&](const float* in, float* out) { return (*cpu_plan)->Apply(in, out); }, b.data(), x_cpu.data(), m.rows,
      options);
  ASSERT_TRUE(cpu_result.ok()) << cpu_result.status();
  ASSERT_TRUE(cpu_result->converged);

  auto rp = DeviceArray<int32_t>::FromHost(m.row_ptr, *stream);
  auto ci = DeviceArray<int32_t>::FromHost(m.col_idx, *stream);
  auto va = DeviceArray<float>::FromHost(m.values, *stream);
  const CsrMatrix dm{m.rows, m.cols, m.nnz(), rp.data(), ci.data(), va.data()};
  auto plan = SpmvPlan::Create(dm, *stream, {SpmvAlgorithm::kBucketed, ExecutionMode::kDeterministic});
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto db = DeviceArray<float>::FromHost(b, *stream);
  std::vector<std::vector<float>> runs;
  for (int run = 0; run < 2; ++run) {
    auto dx = DeviceArray<float>::Allocate(m.rows, *stream);
    dx.Poison(::tessera::testing::kNaN);  // zero_initial_guess overwrites it
    auto result = ConjugateGradient(
        *stream, [&](const float* in, float* out) { return (*plan)->Apply(in, out); }, db.data(), dx.data(), m.rows,
        options);
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(result->converged);
    EXPECT_NEAR(result->iterations, cpu_result->iterations, 2);
    runs.push_back(dx.Download());
    EXPECT_LT(::tessera::testing::RelL2(runs.back(), x_cpu), 2e-4);
  }
  EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace linalg
}  // namespace recon
}  // namespace tessera
