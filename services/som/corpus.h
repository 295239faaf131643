// Sparse binary corpora for the SOM atlas: an in-memory CSR matrix (documents
// x features, presence only), libsvm/svmlight text and a compact binary CSR
// file, plus one-name-per-line files (feature names, row ids).
//
// libsvm / svmlight text, one document per line:
//     <label> <index>:<value> <index>:<value> ... [# comment]
//   - label: any token without ':' (kept verbatim, e.g. "1", "-1", "3,7");
//     a line whose first token has ':' has no label ("").
//   - index: integer >= index_base (1 in libsvm/svmlight; 0 allowed by option);
//     column = index - index_base. Any order; duplicates are an error.
//   - value: a finite, non-zero number; binary corpora keep presence only.
//     An explicit 0 (or NaN/inf) is an error, not a silent drop.
//   - "qid:<n>" tokens (svmlight ranking) are skipped. Blank and comment-only
//     lines are skipped and are not documents. CRLF line ends are accepted.
// Errors name the line (1-based) and the token.
//
// Binary CSR (".csr"), little-endian, 8-byte aligned sections:
//     offset  size            field
//     0       8               magic "TSSOMCSR"
//     8       4               uint32 version (1)
//     12      4               uint32 flags (0; reserved)
//     16      8               int64 rows
//     24      8               int64 cols            (< 2^31)
//     32      8               int64 nnz
//     40      8 (rows + 1)    int64 row offsets     (0, non-decreasing, = nnz at the end)
//     ...     4 nnz           int32 column indices  (strictly increasing per row, < cols)
//     ...     4 (nnz odd)     zero padding
//     end-4   4               uint32 CRC-32 (zlib) of every preceding byte
// The reader checks the size against the header before allocating, then every
// field, the per-row ordering and the checksum, naming what is wrong.
#ifndef TESSERA_SERVICES_SOM_CORPUS_H_
#define TESSERA_SERVICES_SOM_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "kernels/som/types.h"

namespace tessera {
namespace som {

class SparseBinaryMatrix {
 public:
  SparseBinaryMatrix() = default;
  explicit SparseBinaryMatrix(int64_t cols) : cols_(cols) {}
  // Takes the arrays as they are; Validate() says whether they form a CSR.
  SparseBinaryMatrix(int64_t cols, std::vector<int64_t> offsets, std::vector<int32_t> indices)
      : cols_(cols), offsets_(std::move(offsets)), indices_(std::move(indices)) {}

  int64_t rows() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  int64_t cols() const { return cols_; }
  int64_t nnz() const { return static_cast<int64_t>(indices_.size()); }
  absl::Span<const int32_t> row(int64_t r) const {
    return absl::MakeConstSpan(indices_.data() + offsets_[r], offsets_[r + 1] - offsets_[r]);
  }
  const std::vector<int64_t>& offsets() const { return offsets_; }
  const std::vector<int32_t>& indices() const { return indices_; }
  CsrView view() const;

  // Appends a row. `columns` may be unsorted; duplicates or out-of-range
  // columns are INVALID_ARGUMENT (the matrix is unchanged then).
  absl::Status AppendRow(absl::Span<const int32_t> columns);
  // Appends a row that is already sorted, unique and in range (unchecked).
  void AppendSortedRow(absl::Span<const int32_t> columns);
  void set_cols(int64_t cols) { cols_ = cols; }
  void Reserve(int64_t rows, int64_t nnz);

  // offsets/indices form a CSR over cols() columns (sorted unique rows).
  absl::Status Validate() const;

  bool operator==(const SparseBinaryMatrix& o) const {
    return cols_ == o.cols_ && offsets_ == o.offsets_ && indices_ == o.indices_;
  }

 private:
  int64_t cols_ = 0;
  std::vector<int64_t> offsets_{0};
  std::vector<int32_t> indices_;
};

struct LabeledCorpus {
  SparseBinaryMatrix matrix;
  std::vector<std::string> labels;  // one per row ("" when a line had none)
};

struct LibsvmOptions {
  int index_base = 1;         // 1 for libsvm/svmlight files
  int64_t num_features = -1;  // -1: the largest index + 1; otherwise a bound (error above it)
};

absl::StatusOr<LabeledCorpus> ParseLibsvm(absl::string_view text, const LibsvmOptions& options = LibsvmOptions());
absl::StatusOr<LabeledCorpus> ReadLibsvm(const std::string& path, const LibsvmOptions& options = LibsvmOptions());
// Writes "<label> <index>:1 ..." lines; labels may be empty (then "0"), else
// one per row and free of whitespace and '#'.
std::string FormatLibsvm(const SparseBinaryMatrix& matrix, absl::Span<const std::string> labels = {},
                         int index_base = 1);
absl::Status WriteLibsvm(const std::string& path, const SparseBinaryMatrix& matrix,
                         absl::Span<const std::string> labels = {}, int index_base = 1);

absl::Status WriteCsrBinary(const std::string& path, const SparseBinaryMatrix& matrix);
absl::StatusOr<SparseBinaryMatrix> ReadCsrBinary(const std::string& path);
// The same from / to memory (tests, services).
std::string SerializeCsrBinary(const SparseBinaryMatrix& matrix);
absl::StatusOr<SparseBinaryMatrix> ParseCsrBinary(absl::string_view bytes);

// Reads a corpus by extension: ".csr" binary, anything else libsvm text.
absl::StatusOr<SparseBinaryMatrix> ReadCorpus(const std::string& path, const LibsvmOptions& options = LibsvmOptions());

// One entry per line (feature names, row ids). Entries must not contain
// newlines. Reading strips a trailing '\r'; a final newline is optional;
// `expected` >= 0 makes a different count an error.
absl::Status WriteLines(const std::string& path, absl::Span<const std::string> lines);
absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& path, int64_t expected = -1);

// Row subsets and splits.
SparseBinaryMatrix SelectRows(const SparseBinaryMatrix& matrix, absl::Span<const int64_t> rows);
struct RowSplit {
  std::vector<int64_t> train;     // ascending
  std::vector<int64_t> held_out;  // ascending
};
// A seeded random split with exactly floor(rows * held_out_fraction) held-out
// rows (18,656 training rows of the 20,728 genes at 0.1, as somoclu's run).
RowSplit SplitRows(int64_t rows, double held_out_fraction, uint64_t seed);

// Per-feature document frequencies.
std::vector<int64_t> FeatureCounts(const SparseBinaryMatrix& matrix);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_CORPUS_H_
