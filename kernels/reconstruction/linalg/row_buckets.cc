// Counting sort of rows by length class, and chunking of the long rows.
#include "kernels/reconstruction/linalg/row_buckets.h"

#include <algorithm>

namespace tessera {
namespace recon {
namespace linalg {

int RowClass(int64_t length) {
  for (int c = 0; c < kNumRowClasses; ++c) {
    if (length <= kRowClassMaxLength[c]) return c;
  }
  return kNumRowClasses;
}

RowBuckets BucketRows(const int32_t* row_ptr, int64_t rows) {
  RowBuckets b;
  std::array<int64_t, kNumRowClasses + 1> count{};
  std::vector<uint8_t> cls(rows);
  for (int64_t r = 0; r < rows; ++r) {
    cls[r] = static_cast<uint8_t>(RowClass(static_cast<int64_t>(row_ptr[r + 1]) - row_ptr[r]));
    ++count[cls[r]];
  }
  b.class_begin[0] = 0;
  for (int c = 0; c < kNumRowClasses; ++c) b.class_begin[c + 1] = b.class_begin[c] + count[c];
  const int64_t short_rows = b.class_begin[kNumRowClasses];
  for (int c = 0; c < kNumRowClasses; ++c) {
    if (count[c] == rows && rows > 0) b.identity = true;
  }
  if (!b.identity) {
    b.rows.resize(short_rows);
    std::array<int64_t, kNumRowClasses> next{};
    for (int c = 0; c < kNumRowClasses; ++c) next[c] = b.class_begin[c];
    for (int64_t r = 0; r < rows; ++r) {
      if (cls[r] < kNumRowClasses) b.rows[next[cls[r]]++] = static_cast<int32_t>(r);
    }
  }
  b.long_chunk_begin.push_back(0);
  for (int64_t r = 0; r < rows; ++r) {
    if (cls[r] != kNumRowClasses) continue;
    b.long_rows.push_back(static_cast<int32_t>(r));
    for (int64_t k = row_ptr[r]; k < row_ptr[r + 1]; k += kLongChunk) {
      b.chunk_row.push_back(static_cast<int32_t>(r));
      b.chunk_start.push_back(static_cast<int32_t>(k));
    }
    b.long_chunk_begin.push_back(static_cast<int32_t>(b.chunk_row.size()));
  }
  return b;
}

RowLengthStats ComputeRowLengthStats(const int32_t* row_ptr, int64_t rows) {
  RowLengthStats s;
  s.rows = rows;
  s.nnz = rows > 0 ? row_ptr[rows] : 0;
  for (int64_t r = 0; r < rows; ++r) s.max_length = std::max<int64_t>(s.max_length, row_ptr[r + 1] - row_ptr[r]);
  s.mean_length = rows > 0 ? static_cast<double>(s.nnz) / static_cast<double>(rows) : 0.0;
  s.padding_waste =
      s.max_length > 0 ? 1.0 - static_cast<double>(s.nnz) / (static_cast<double>(rows) * s.max_length) : 0.0;
  return s;
}

}  // namespace linalg
}  // namespace recon
}  // namespace tessera
