// Rows of a CSR matrix grouped by length for the bucketed SpMV kernel (seed
// code 1: variable-length rows padded to fixed-length tiles). Padding every
// row to the longest one wastes work when lengths are skewed (power-law
// system matrices, list-mode PET); grouping rows into length classes makes
// each class's tile width close to its rows' real lengths:
//   class:          0    1    2    3    4     5     6
//   max length:     4    8   16   32   64   128   256
//   lanes per row:  1    2    4    8   16    32    32
// Rows longer than 256 are split into chunks of kLongChunk entries, each
// summed by one warp; a second pass adds a row's chunk sums in chunk order.
// Every sum therefore has a fixed order that depends only on the structure.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_LINALG_ROW_BUCKETS_H_
#define TESSERA_KERNELS_RECONSTRUCTION_LINALG_ROW_BUCKETS_H_

#include <array>
#include <cstdint>
#include <vector>

namespace tessera {
namespace recon {
namespace linalg {

constexpr int kNumRowClasses = 7;
constexpr std::array<int32_t, kNumRowClasses> kRowClassMaxLength = {4, 8, 16, 32, 64, 128, 256};
constexpr std::array<int, kNumRowClasses> kRowClassLanes = {1, 2, 4, 8, 16, 32, 32};
constexpr int32_t kLongChunk = 1024;

// The class of a row of `length` entries, or kNumRowClasses for a long row.
int RowClass(int64_t length);

struct RowBuckets {
  // Rows of class c are rows[class_begin[c] .. class_begin[c + 1]), increasing.
  std::vector<int32_t> rows;
  std::array<int64_t, kNumRowClasses + 1> class_begin{};
  // True when every row is in one class and `rows` is 0, 1, ..., n - 1 (the
  // kernel then needs no row list).
  bool identity = false;
  // Long rows, increasing; chunks of long_rows[i] are
  // chunk_begin[i] .. chunk_begin[i + 1] - 1.
  std::vector<int32_t> long_rows;
  std::vector<int32_t> long_chunk_begin;
  // Per chunk: its row and its first entry (it ends kLongChunk later or at
  // the row's end).
  std::vector<int32_t> chunk_row;
  std::vector<int32_t> chunk_start;

  int64_t num_chunks() const { return static_cast<int64_t>(chunk_row.size()); }
};

// row_ptr in host memory, already checked (CheckCsrRowPointers).
RowBuckets BucketRows(const int32_t* row_ptr, int64_t rows);

// Summary of the row lengths (SpmvPlan::row_stats, the benchmark).
struct RowLengthStats {
  int64_t rows = 0;
  int64_t nnz = 0;
  int64_t max_length = 0;
  double mean_length = 0;
  // Fraction of the work a one-tile-width-for-all kernel (tile = max length)
  // would spend on padding: 1 - nnz / (rows * max_length).
  double padding_waste = 0;
};
RowLengthStats ComputeRowLengthStats(const int32_t* row_ptr, int64_t rows);

}  // namespace linalg
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_LINALG_ROW_BUCKETS_H_
