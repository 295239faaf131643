// CPU: the reference SpMV on a hand-checked matrix, argument checks naming the
// row, and the row buckets (a partition of the rows with fitting classes).
#include "kernels/reconstruction/linalg/spmv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/reconstruction/linalg/random_problems.h"
#include "kernels/reconstruction/linalg/row_buckets.h"

namespace tessera {
namespace recon {
namespace linalg {
namespace {

using ::testing::HasSubstr;

// [[1 0 2], [0 0 0], [0 -3 0], [4 5 6]]
HostCsr Small() {
  HostCsr m;
  m.rows = 4;
  m.cols = 3;
  m.row_ptr = {0, 2, 2, 3, 6};
  m.col_idx = {0, 2, 1, 0, 1, 2};
  m.values = {1, 2, -3, 4, 5, 6};
  return m;
}

TEST(SpmvTest, CpuComputesAlphaAxPlusBetaY) {
  const HostCsr m = Small();
  const Stream cpu = Stream::Cpu();
  auto plan = SpmvPlan::Create(m.View(), cpu);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::vector<float> x = {1, 2, 3};
  std::vector<float> y(4, std::numeric_limits<float>::quiet_NaN());  // beta == 0: y is not read
  ASSERT_TRUE((*plan)->Apply(x.data(), y.data()).ok());
  EXPECT_EQ(y, (std::vector<float>{7, 0, -6, 32}));
  ASSERT_TRUE((*plan)->Apply(x.data(), y.data(), 2.0f, -1.0f).ok());
  EXPECT_EQ(y, (std::vector<float>{7, 0, -6, 32}));  // 2 Ax - Ax
  EXPECT_EQ((*plan)->row_stats().max_length, 3);
  EXPECT_EQ((*plan)->algorithm(), SpmvAlgorithm::kCusparse);  // kAuto resolved
}

TEST(SpmvTest, ReferenceMatchesDoubleLoopOnPowerLawRows) {
  const HostCsr m = RandomCsr(3000, 2000, PowerLawRowLengths(3000, 12, 1500, 1.3, 0.05, 7), 8);
  std::vector<float> x(m.cols), y(m.rows, 0.5f);
  for (int64_t i = 0; i < m.cols; ++i) x[i] = std::sin(0.37 * i) + 0.1f;
  const std::vector<float> y0 = y;
  const Stream cpu = Stream::Cpu();
  auto plan = SpmvPlan::Create(m.View(), cpu, {SpmvAlgorithm::kCusparse, ExecutionMode::kDeterministic});
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE((*plan)->Apply(x.data(), y.data(), 0.75f, 2.0f).ok());
  for (int64_t r = 0; r < m.rows; ++r) {
    double s = 0;
    for (int32_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) s += double{m.values[k]} * x[m.col_idx[k]];
    ASSERT_FLOAT_EQ(y[r], static_cast<float>(0.75 * s + 2.0 * y0[r])) << "row " << r;
  }
}

TEST(SpmvTest, BadMatricesAreInvalidArgumentNamingTheRow) {
  const Stream cpu = Stream::Cpu();
  HostCsr m = Small();
  m.row_ptr = {0, 2, 1, 3, 6};
  auto s = SpmvPlan::Create(m.View(), cpu).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("decreases at row 1"));

  m = Small();
  m.col_idx[4] = 3;  // row 3, cols == 3
  s = SpmvPlan::Create(m.View(), cpu).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("row 3 has column index 3"));
  m.col_idx[4] = -1;
  EXPECT_THAT(std::string(SpmvPlan::Create(m.View(), cpu).status().message()), HasSubstr("row 3"));

  m = Small();
  CsrMatrix v = m.View();
  v.nnz = 5;  // row_ptr[4] == 6
  s = SpmvPlan::Create(v, cpu).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("size mismatch"));

  v = m.View();
  v.rows = -1;
  EXPECT_EQ(SpmvPlan::Create(v, cpu).status().code(), absl::StatusCode::kInvalidArgument);
  v = m.View();
  v.values = nullptr;
  EXPECT_EQ(SpmvPlan::Create(v, cpu).status().code(), absl::StatusCode::kInvalidArgument);

  auto plan = SpmvPlan::Create(m.View(), cpu);
  ASSERT_TRUE(plan.ok());
  std::vector<float> y(4);
  EXPECT_EQ((*plan)->Apply(nullptr, y.data()).code(), absl::StatusCode::kInvalidArgument);
}

// cuSPARSE refuses nnz > rows x cols (repeated entries): kAuto picks the
// bucketed kernel, an explicit kCusparse is INVALID_ARGUMENT.
TEST(SpmvTest, RepeatedEntriesBeyondRowsTimesColsAvoidCusparse) {
  HostCsr m;
  m.rows = 1;
  m.cols = 2;
  m.row_ptr = {0, 3};
  m.col_idx = {0, 1, 1};
  m.values = {1, 2, 3};
  const Stream cpu = Stream::Cpu();
  auto plan = SpmvPlan::Create(m.View(), cpu);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ((*plan)->algorithm(), SpmvAlgorithm::kBucketed);
  const std::vector<float> x = {1, 10};
  float y = 0;
  ASSERT_TRUE((*plan)->Apply(x.data(), &y).ok());
  EXPECT_EQ(y, 51.0f);
  const absl::Status s = SpmvPlan::Create(m.View(), cpu, {SpmvAlgorithm::kCusparse}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("kBucketed"));
}

TEST(SpmvTest, EmptyMatrixScalesY) {
  HostCsr m;
  m.rows = 3;
  m.cols = 2;
  m.row_ptr = {0, 0, 0, 0};
  const Stream cpu = Stream::Cpu();
  auto plan = SpmvPlan::Create(m.View(), cpu);
  ASSERT_TRUE(plan.ok()) << plan.status();
  std::vector<float> x = {1, 2}, y = {1, 2, 3};
  ASSERT_TRUE((*plan)->Apply(x.data(), y.data(), 1.0f, 3.0f).ok());
  EXPECT_EQ(y, (std::vector<float>{3, 6, 9}));
}

TEST(RowBucketsTest, ClassesPartitionTheRowsAndChunksCoverLongRows) {
  std::vector<int64_t> lengths = PowerLawRowLengths(5000, 20, 5000, 1.2, 0.1, 3);
  lengths[17] = 100000;  // one huge row
  lengths[18] = 257;     // just long
  lengths[19] = 256;     // just short
  const HostCsr m = RandomCsr(5000, 1000, lengths, 4);
  const RowBuckets b = BucketRows(m.row_ptr.data(), m.rows);
  EXPECT_FALSE(b.identity);
  std::vector<int> seen(m.rows, 0);
  for (int c = 0; c < kNumRowClasses; ++c) {
    for (int64_t i = b.class_begin[c]; i < b.class_begin[c + 1]; ++i) {
      const int32_t r = b.rows[i];
      ++seen[r];
      const int64_t len = lengths[r];
      EXPECT_LE(len, kRowClassMaxLength[c]);
      if (c > 0) {
        EXPECT_GT(len, kRowClassMaxLength[c - 1]);
      }
      if (i > b.class_begin[c]) {
        EXPECT_LT(b.rows[i - 1], r);
      }
    }
  }
  ASSERT_EQ(b.long_chunk_begin.size(), b.long_rows.size() + 1);
  for (size_t i = 0; i < b.long_rows.size(); ++i) {
    const int32_t r = b.long_rows[i];
    ++seen[r];
    EXPECT_GT(lengths[r], 256);
    int64_t covered = 0;
    for (int32_t c = b.long_chunk_begin[i]; c < b.long_chunk_begin[i + 1]; ++c) {
      EXPECT_EQ(b.chunk_row[c], r);
      EXPECT_EQ(b.chunk_start[c], m.row_ptr[r] + covered);
      covered += std::min<int64_t>(kLongChunk, m.row_ptr[r + 1] - b.chunk_start[c]);
    }
    EXPECT_EQ(covered, lengths[r]);
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), m.rows);
  EXPECT_EQ(b.long_chunk_begin[1] - b.long_chunk_begin[0], lengths[17] / kLongChunk + 1);  // 98 chunks, the last short
  EXPECT_EQ(RowClass(0), 0);
  EXPECT_EQ(RowClass(256), 6);
  EXPECT_EQ(RowClass(257), kNumRowClasses);

  const HostCsr uniform = RandomCsr(100, 50, UniformRowLengths(100, 30), 5);
  const RowBuckets u = BucketRows(uniform.row_ptr.data(), uniform.rows);
  EXPECT_TRUE(u.identity);
  EXPECT_TRUE(u.rows.empty());
  EXPECT_EQ(u.class_begin[4] - u.class_begin[3], 100);
}

}  // namespace
}  // namespace linalg
}  // namespace recon
}  // namespace tessera
