// CUDA SpMV (bucketed kernel, cuSPARSE ALG1/ALG2) against the CPU reference on
// random matrices with power-law rows, empty rows and one huge row;
// bit-identical repeats where promised; device-side argument checks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "common/testing/device_array.h"
#include "common/testing/gpu_test.h"
#include "kernels/reconstruction/linalg/random_problems.h"
#include "kernels/reconstruction/linalg/spmv.h"

namespace tessera {
namespace recon {
namespace linalg {
namespace {

using ::tessera::testing::DeviceArray;
using ::testing::HasSubstr;

struct DeviceCsr {
  DeviceArray<int32_t> row_ptr, col_idx;
  DeviceArray<float> values;
  CsrMatrix view;
};

DeviceCsr Upload(const HostCsr& m, const Stream& stream) {
  DeviceCsr d{DeviceArray<int32_t>::FromHost(m.row_ptr, stream),
              DeviceArray<int32_t>::FromHost(m.col_idx, stream),
              DeviceArray<float>::FromHost(m.values, stream),
              {}};
  d.view = CsrMatrix{m.rows, m.cols, m.nnz(), d.row_ptr.data(), d.col_idx.data(), d.values.data()};
  return d;
}

// Power-law rows (5% empty), rows of every class, one row of 200000 entries.
HostCsr SkewedMatrix() {
  std::vector<int64_t> lengths = PowerLawRowLengths(40000, 16, 4000, 1.1, 0.05, 11);
  lengths[123] = 200000;
  for (int i = 0; i < 12; ++i) lengths[1000 + i] = int64_t{1} << i;  // 1 ... 2048
  return RandomCsr(40000, 30000, lengths, 12);
}

// Where |got - ref| > 1e-5 * (alpha sum |a x| + |beta y0|) + 1e-5, the first bad row; -1 if none.
int64_t FirstMismatch(const HostCsr& m, const std::vector<float>& x, const std::vector<float>& y0, float alpha,
                      float beta, const std::vector<float>& got, const std::vector<float>& ref) {
  for (int64_t r = 0; r < m.rows; ++r) {
    double scale = 0;
    for (int32_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) scale += std::fabs(double{m.values[k]} * x[m.col_idx[k]]);
    scale = std::fabs(alpha) * scale + (beta != 0.0f ? std::fabs(beta * y0[r]) : 0.0);
    if (!(std::fabs(double{got[r]} - ref[r]) <= 1e-5 * scale + 1e-5)) return r;
  }
  return -1;
}

void CheckParity(const HostCsr& m, SpmvAlgorithm algorithm, ExecutionMode mode) {
  SCOPED_TRACE(std::string(SpmvAlgorithmName(algorithm)) + " " + ExecutionModeName(mode));
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok()) << stream.status();
  DeviceCsr d = Upload(m, *stream);
  auto plan = SpmvPlan::Create(d.view, *stream, {algorithm, mode});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->algorithm(), algorithm);
  const std::vector<float> x = ::tessera::testing::RandomUniform<float>(m.cols, -1, 1, 21);
  const std::vector<float> y0 = ::tessera::testing::RandomUniform<float>(m.rows, -1, 1, 22);
  DeviceArray<float> dx = DeviceArray<float>::FromHost(x, *stream);
  DeviceArray<float> dy = DeviceArray<float>::Allocate(m.rows, *stream);
  // beta == 0: our kernel never reads y (NaN stays out); cuSPARSE gets finite garbage.
  dy.Poison(algorithm == SpmvAlgorithm::kBucketed ? ::tessera::testing::kNaN : 7.0f);
  ASSERT_TRUE((*plan)->Apply(dx.data(), dy.data()).ok());
  std::vector<float> ref(m.rows);
  cpu::Spmv(m.View(), x.data(), ref.data(), 1.0f, 0.0f);
  const std::vector<float> first = dy.Download();
  EXPECT_EQ(FirstMismatch(m, x, y0, 1.0f, 0.0f, first, ref), -1);

  const bool deterministic = algorithm == SpmvAlgorithm::kBucketed || mode == ExecutionMode::kDeterministic;
  if (deterministic) {
    for (int rep = 0; rep < 3; ++rep) {
      ASSERT_TRUE((*plan)->Apply(dx.data(), dy.data()).ok());
      const std::vector<float> again = dy.Download();
      EXPECT_EQ(std::memcmp(again.data(), first.data(), first.size() * sizeof(float)), 0) << "repeat " << rep;
    }
  }

  dy.Upload(y0);
  ASSERT_TRUE((*plan)->Apply(dx.data(), dy.data(), -0.5f, 2.0f).ok());
  ref = y0;
  cpu::Spmv(m.View(), x.data(), ref.data(), -0.5f, 2.0f);
  EXPECT_EQ(FirstMismatch(m, x, y0, -0.5f, 2.0f, dy.Download(), ref), -1);
}

TEST(SpmvCudaTest, BucketedMatchesCpuOnSkewedRows) {
  TESSERA_SKIP_WITHOUT_GPU();
  const HostCsr m = SkewedMatrix();
  CheckParity(m, SpmvAlgorithm::kBucketed, ExecutionMode::kDefault);
  CheckParity(m, SpmvAlgorithm::kBucketed, ExecutionMode::kDeterministic);
}

TEST(SpmvCudaTest, CusparseMatchesCpuOnSkewedRows) {
  TESSERA_SKIP_WITHOUT_GPU();
  const HostCsr m = SkewedMatrix();
  CheckParity(m, SpmvAlgorithm::kCusparse, ExecutionMode::kDefault);        // ALG1
  CheckParity(m, SpmvAlgorithm::kCusparse, ExecutionMode::kDeterministic);  // ALG2, bit-identical repeats
}

TEST(SpmvCudaTest, UniformRowsAndSingleHugeRow) {
  TESSERA_SKIP_WITHOUT_GPU();
  const HostCsr uniform = RandomCsr(20000, 20000, UniformRowLengths(20000, 27), 31);  // one class, no row list
  CheckParity(uniform, SpmvAlgorithm::kBucketed, ExecutionMode::kDefault);
  CheckParity(uniform, SpmvAlgorithm::kCusparse, ExecutionMode::kDefault);
  // A single row over 293 chunks (cols >= nnz: cuSPARSE refuses nnz > rows x cols).
  const HostCsr huge = RandomCsr(1, 400000, {300000}, 32);
  CheckParity(huge, SpmvAlgorithm::kBucketed, ExecutionMode::kDefault);
  CheckParity(huge, SpmvAlgorithm::kCusparse, ExecutionMode::kDeterministic);
  HostCsr empty_rows = RandomCsr(500, 40, std::vector<int64_t>(500, 0), 33);  // no entries at all
  CheckParity(empty_rows, SpmvAlgorithm::kBucketed, ExecutionMode::kDefault);
  CheckParity(empty_rows, SpmvAlgorithm::kCusparse, ExecutionMode::kDefault);
}

TEST(SpmvCudaTest, DeviceMatricesAreCheckedNamingTheRow) {
  TESSERA_SKIP_WITHOUT_GPU();
  auto stream = Stream::Create(Backend::kCuda);
  ASSERT_TRUE(stream.ok());
  HostCsr m = RandomCsr(1000, 100, UniformRowLengths(1000, 5), 41);
  m.col_idx[5 * 700 + 2] = 100;  // row 700
  DeviceCsr d = Upload(m, *stream);
  auto s = SpmvPlan::Create(d.view, *stream).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("row 700 has column index 100"));

  m = RandomCsr(1000, 100, UniformRowLengths(1000, 5), 42);
  m.row_ptr[300] = m.row_ptr[301] + 1;  // decreases from row 300 to 301
  DeviceCsr d2 = Upload(m, *stream);
  s = SpmvPlan::Create(d2.view, *stream, {SpmvAlgorithm::kCusparse}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("row 300"));

  d.view.nnz -= 1;  // row_ptr[rows] is one more
  EXPECT_THAT(std::string(SpmvPlan::Create(d.view, *stream).status().message()), HasSubstr("size mismatch"));
}

}  // namespace
}  // namespace linalg
}  // namespace recon
}  // namespace tessera
