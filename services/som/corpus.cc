#include "services/som/corpus.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace tessera {
namespace som {

// ---------------------------------------------------------------------------
// SparseBinaryMatrix

CsrView SparseBinaryMatrix::view() const {
  CsrView v;
  v.rows = rows();
  v.cols = cols_;
  v.offsets = offsets_.data();
  v.indices = indices_.data();
  return v;
}

void SparseBinaryMatrix::Reserve(int64_t rows, int64_t nnz) {
  offsets_.reserve(rows + 1);
  indices_.reserve(nnz);
}

absl::Status SparseBinaryMatrix::AppendRow(absl::Span<const int32_t> columns) {
  std::vector<int32_t> sorted(columns.begin(), columns.end());
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 0; k < sorted.size(); ++k) {
    if (sorted[k] < 0 || sorted[k] >= cols_) {
      return absl::InvalidArgumentError(absl::StrCat("column ", sorted[k], " is outside [0, ", cols_, ")"));
    }
    if (k > 0 && sorted[k] == sorted[k - 1]) {
      return absl::InvalidArgumentError(absl::StrCat("column ", sorted[k], " appears twice in a row"));
    }
  }
  AppendSortedRow(sorted);
  return absl::OkStatus();
}

void SparseBinaryMatrix::AppendSortedRow(absl::Span<const int32_t> columns) {
  indices_.insert(indices_.end(), columns.begin(), columns.end());
  offsets_.push_back(static_cast<int64_t>(indices_.size()));
}

absl::Status SparseBinaryMatrix::Validate() const {
  if (cols_ < 0 || cols_ > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("column count ", cols_, " is outside [0, 2^31)"));
  }
  if (offsets_.empty() || offsets_[0] != 0) return absl::InvalidArgumentError("row offsets must start at 0");
  if (offsets_.back() != nnz()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the last row offset is ", offsets_.back(), " but there are ", nnz(), " column indices"));
  }
  for (int64_t r = 0; r < rows(); ++r) {
    if (offsets_[r + 1] < offsets_[r] || offsets_[r + 1] > nnz()) {
      return absl::InvalidArgumentError(
          absl::StrCat("row offsets decrease or pass the ", nnz(), " non-zeros at row ", r));
    }
  }
  for (int64_t r = 0; r < rows(); ++r) {
    for (int64_t k = offsets_[r]; k < offsets_[r + 1]; ++k) {
      if (indices_[k] < 0 || indices_[k] >= cols_) {
        return absl::InvalidArgumentError(
            absl::StrCat("row ", r, ": column ", indices_[k], " is outside [0, ", cols_, ")"));
      }
      if (k > offsets_[r] && indices_[k] <= indices_[k - 1]) {
        return absl::InvalidArgumentError(
            absl::StrCat("row ", r, ": columns are not strictly increasing (", indices_[k - 1], ", ", indices_[k],
                         ")"));
      }
    }
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// Files

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat("error reading ", path));
  return ss.str();
}

absl::Status WriteFile(const std::string& path, absl::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot create ", path));
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.close();
  if (!out) return absl::DataLossError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

}  // namespace

// ---------------------------------------------------------------------------
// libsvm / svmlight

absl::StatusOr<LabeledCorpus> ParseLibsvm(absl::string_view text, const LibsvmOptions& options) {
  if (options.index_base < 0) return absl::InvalidArgumentError("libsvm: negative index base");
  LabeledCorpus out;
  SparseBinaryMatrix& m = out.matrix;
  int64_t max_col = -1;
  std::vector<int32_t> row;
  int64_t line_no = 0;
  size_t pos = 0;
  auto error = [&](absl::string_view what, absl::string_view token) {
    return absl::InvalidArgumentError(absl::StrCat("libsvm line ", line_no, ": ", what, " ('", token, "')"));
  };
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == absl::string_view::npos) end = text.size();
    absl::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    // Tokenize on blanks.
    size_t i = 0;
    auto next_token = [&]() -> absl::string_view {
      while (i < line.size() && IsSpace(line[i])) ++i;
      const size_t start = i;
      while (i < line.size() && !IsSpace(line[i])) ++i;
      return line.substr(start, i - start);
    };
    absl::string_view token = next_token();
    if (token.empty()) continue;  // blank or comment-only line
    std::string label;
    if (token.find(':') == absl::string_view::npos) {
      label = std::string(token);
      token = next_token();
    }
    row.clear();
    for (; !token.empty(); token = next_token()) {
      const size_t colon = token.find(':');
      if (colon == absl::string_view::npos) return error("expected <index>:<value>", token);
      const absl::string_view key = token.substr(0, colon), value = token.substr(colon + 1);
      if (key == "qid") continue;
      int64_t index;
      if (!absl::SimpleAtoi(key, &index)) return error("index is not an integer", token);
      if (index < options.index_base) {
        return error(absl::StrCat("index is below the index base ", options.index_base), token);
      }
      const int64_t col = index - options.index_base;
      if (col >= std::numeric_limits<int32_t>::max()) return error("index is too large", token);
      if (options.num_features >= 0 && col >= options.num_features) {
        return error(absl::StrCat("index exceeds the ", options.num_features, " features"), token);
      }
      if (value != "1") {
        double v;
        if (!absl::SimpleAtod(value, &v) || !std::isfinite(v)) return error("value is not a finite number", token);
        if (v == 0) return error("explicit zero value (binary corpora list present features only)", token);
      }
      row.push_back(static_cast<int32_t>(col));
    }
    std::sort(row.begin(), row.end());
    for (size_t k = 1; k < row.size(); ++k) {
      if (row[k] == row[k - 1]) {
        return error("feature index appears twice", std::to_string(int64_t{row[k]} + options.index_base));
      }
    }
    if (!row.empty()) max_col = std::max<int64_t>(max_col, row.back());
    m.AppendSortedRow(row);
    out.labels.push_back(std::move(label));
  }
  m.set_cols(options.num_features >= 0 ? options.num_features : max_col + 1);
  return out;
}

absl::StatusOr<LabeledCorpus> ReadLibsvm(const std::string& path, const LibsvmOptions& options) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  auto parsed = ParseLibsvm(text, options);
  if (!parsed.ok()) return Annotate(parsed.status(), path);
  return parsed;
}

std::string FormatLibsvm(const SparseBinaryMatrix& matrix, absl::Span<const std::string> labels, int index_base) {
  std::string out;
  out.reserve(matrix.nnz() * 8 + matrix.rows() * 3);
  for (int64_t r = 0; r < matrix.rows(); ++r) {
    out += labels.empty() ? "0" : labels[r];
    for (int32_t c : matrix.row(r)) absl::StrAppend(&out, " ", int64_t{c} + index_base, ":1");
    out += '\n';
  }
  return out;
}

absl::Status WriteLibsvm(const std::string& path, const SparseBinaryMatrix& matrix,
                         absl::Span<const std::string> labels, int index_base) {
  if (!labels.empty() && static_cast<int64_t>(labels.size()) != matrix.rows()) {
    return absl::InvalidArgumentError(
        absl::StrCat("libsvm: ", labels.size(), " labels for ", matrix.rows(), " rows"));
  }
  for (const std::string& l : labels) {
    if (l.empty() || l.find_first_of(" \t\r\n#:") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("libsvm: label '", l, "' is empty or has a blank, '#' or ':'"));
    }
  }
  return WriteFile(path, FormatLibsvm(matrix, labels, index_base));
}

// ---------------------------------------------------------------------------
// Binary CSR

namespace {

constexpr char kMagic[8] = {'T', 'S', 'S', 'O', 'M', 'C', 'S', 'R'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 40;

struct Header {
  uint32_t version;
  uint32_t flags;
  int64_t rows;
  int64_t cols;
  int64_t nnz;
};

static_assert(sizeof(int64_t) == 8 && sizeof(int32_t) == 4, "fixed-width types");

bool LittleEndian() {
  const uint16_t one = 1;
  uint8_t first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

uint32_t Crc(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {
    const uInt piece = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    crc = static_cast<uint32_t>(crc32(crc, p, piece));
    p += piece;
    n -= piece;
  }
  return crc;
}

// Expected total file size for a header, or -1 when the counts are absurd.
int64_t ExpectedSize(const Header& h) {
  if (h.rows < 0 || h.nnz < 0 || h.rows > (int64_t{1} << 40) || h.nnz > (int64_t{1} << 40)) return -1;
  return static_cast<int64_t>(kHeaderBytes) + 8 * (h.rows + 1) + 4 * h.nnz + 4 * (h.nnz & 1) + 4;
}

// Sequential byte source for the decoder: a file or a memory block.
class Source {
 public:
  virtual ~Source() = default;
  virtual bool Read(void* dst, size_t n) = 0;
  virtual int64_t size() const = 0;
};

class MemorySource : public Source {
 public:
  explicit MemorySource(absl::string_view bytes) : bytes_(bytes) {}
  bool Read(void* dst, size_t n) override {
    if (bytes_.size() - pos_ < n) return false;
    std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  int64_t size() const override { return static_cast<int64_t>(bytes_.size()); }

 private:
  absl::string_view bytes_;
  size_t pos_ = 0;
};

class FileSource : public Source {
 public:
  FileSource(std::FILE* f, int64_t size) : f_(f), size_(size) {}
  bool Read(void* dst, size_t n) override { return std::fread(dst, 1, n, f_) == n; }
  int64_t size() const override { return size_; }

 private:
  std::FILE* f_;
  int64_t size_;
};

absl::StatusOr<SparseBinaryMatrix> Decode(Source& src) {
  if (!LittleEndian()) return absl::UnimplementedError("binary CSR: big-endian hosts are not supported");
  char head[kHeaderBytes];
  if (src.size() < static_cast<int64_t>(kHeaderBytes) || !src.Read(head, kHeaderBytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("binary CSR: ", src.size(), " bytes is shorter than the 40-byte header"));
  }
  if (std::memcmp(head, kMagic, 8) != 0) {
    return absl::InvalidArgumentError("binary CSR: bad magic (not a Tessera TSSOMCSR file)");
  }
  Header h;
  std::memcpy(&h.version, head + 8, 4);
  std::memcpy(&h.flags, head + 12, 4);
  std::memcpy(&h.rows, head + 16, 8);
  std::memcpy(&h.cols, head + 24, 8);
  std::memcpy(&h.nnz, head + 32, 8);
  if (h.version != kVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("binary CSR: version ", h.version, " is not supported (this reader knows ", kVersion, ")"));
  }
  if (h.flags != 0) return absl::InvalidArgumentError(absl::StrCat("binary CSR: unknown flags ", h.flags));
  if (h.cols < 0 || h.cols > std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("binary CSR: column count ", h.cols, " is outside [0, 2^31)"));
  }
  const int64_t expected = ExpectedSize(h);
  if (expected < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("binary CSR: implausible counts (rows ", h.rows, ", nnz ", h.nnz, ")"));
  }
  if (expected != src.size()) {
    return absl::InvalidArgumentError(absl::StrCat("binary CSR: header says ", h.rows, " rows and ", h.nnz,
                                                   " non-zeros (", expected, " bytes) but the data is ", src.size(),
                                                   " bytes (truncated or trailing data)"));
  }
  uint32_t crc = Crc(0, head, kHeaderBytes);
  std::vector<int64_t> offsets(h.rows + 1);
  std::vector<int32_t> indices(h.nnz);
  if (!src.Read(offsets.data(), 8 * offsets.size())) return absl::DataLossError("binary CSR: short read (offsets)");
  crc = Crc(crc, offsets.data(), 8 * offsets.size());
  if (!src.Read(indices.data(), 4 * indices.size())) return absl::DataLossError("binary CSR: short read (indices)");
  crc = Crc(crc, indices.data(), 4 * indices.size());
  if (h.nnz & 1) {
    uint32_t pad;
    if (!src.Read(&pad, 4)) return absl::DataLossError("binary CSR: short read (padding)");
    if (pad != 0) return absl::InvalidArgumentError("binary CSR: non-zero padding");
    crc = Crc(crc, &pad, 4);
  }
  uint32_t stored;
  if (!src.Read(&stored, 4)) return absl::DataLossError("binary CSR: short read (checksum)");
  if (stored != crc) {
    return absl::DataLossError(absl::StrCat("binary CSR: checksum mismatch (stored ", stored, ", computed ", crc,
                                            "): the file is corrupt"));
  }
  SparseBinaryMatrix m(h.cols, std::move(offsets), std::move(indices));
  absl::Status valid = m.Validate();
  if (!valid.ok()) return Annotate(valid, "binary CSR");
  return m;
}

std::string EncodeHeader(const SparseBinaryMatrix& m) {
  std::string head(kHeaderBytes, '\0');
  const int64_t rows = m.rows(), cols = m.cols(), nnz = m.nnz();
  std::memcpy(&head[0], kMagic, 8);
  std::memcpy(&head[8], &kVersion, 4);
  std::memcpy(&head[16], &rows, 8);
  std::memcpy(&head[24], &cols, 8);
  std::memcpy(&head[32], &nnz, 8);
  return head;
}

}  // namespace

std::string SerializeCsrBinary(const SparseBinaryMatrix& m) {
  std::string out = EncodeHeader(m);
  out.append(reinterpret_cast<const char*>(m.offsets().data()), 8 * m.offsets().size());
  out.append(reinterpret_cast<const char*>(m.indices().data()), 4 * m.indices().size());
  if (m.nnz() & 1) out.append(4, '\0');
  const uint32_t crc = Crc(0, out.data(), out.size());
  out.append(reinterpret_cast<const char*>(&crc), 4);
  return out;
}

absl::StatusOr<SparseBinaryMatrix> ParseCsrBinary(absl::string_view bytes) {
  MemorySource src(bytes);
  return Decode(src);
}

absl::Status WriteCsrBinary(const std::string& path, const SparseBinaryMatrix& m) {
  TESSERA_RETURN_IF_ERROR(m.Validate());
  if (!LittleEndian()) return absl::UnimplementedError("binary CSR: big-endian hosts are not supported");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), &std::fclose);
  if (f == nullptr) return absl::PermissionDeniedError(absl::StrCat("cannot create ", path));
  const std::string head = EncodeHeader(m);
  uint32_t crc = Crc(0, head.data(), head.size());
  bool ok = std::fwrite(head.data(), 1, head.size(), f.get()) == head.size();
  const size_t ob = 8 * m.offsets().size(), ib = 4 * m.indices().size();
  ok = ok && std::fwrite(m.offsets().data(), 1, ob, f.get()) == ob;
  crc = Crc(crc, m.offsets().data(), ob);
  ok = ok && std::fwrite(m.indices().data(), 1, ib, f.get()) == ib;
  crc = Crc(crc, m.indices().data(), ib);
  if (m.nnz() & 1) {
    const uint32_t pad = 0;
    ok = ok && std::fwrite(&pad, 1, 4, f.get()) == 4;
    crc = Crc(crc, &pad, 4);
  }
  ok = ok && std::fwrite(&crc, 1, 4, f.get()) == 4;
  ok = (std::fclose(f.release()) == 0) && ok;
  if (!ok) return absl::DataLossError(absl::StrCat("error writing ", path));
  return absl::OkStatus();
}

absl::StatusOr<SparseBinaryMatrix> ReadCsrBinary(const std::string& path) {
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (f == nullptr) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  if (std::fseek(f.get(), 0, SEEK_END) != 0) return absl::DataLossError(absl::StrCat("cannot seek in ", path));
  const long size = std::ftell(f.get());
  if (size < 0 || std::fseek(f.get(), 0, SEEK_SET) != 0) {
    return absl::DataLossError(absl::StrCat("cannot size ", path));
  }
  FileSource src(f.get(), size);
  auto m = Decode(src);
  if (!m.ok()) return Annotate(m.status(), path);
  return m;
}

absl::StatusOr<SparseBinaryMatrix> ReadCorpus(const std::string& path, const LibsvmOptions& options) {
  if (absl::EndsWith(path, ".csr")) return ReadCsrBinary(path);
  TESSERA_ASSIGN_OR_RETURN(LabeledCorpus corpus, ReadLibsvm(path, options));
  return std::move(corpus.matrix);
}

// ---------------------------------------------------------------------------
// Line files

absl::Status WriteLines(const std::string& path, absl::Span<const std::string> lines) {
  std::string out;
  for (const std::string& l : lines) {
    if (l.find('\n') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("line entry has a newline: '", l, "'"));
    }
    absl::StrAppend(&out, l, "\n");
  }
  return WriteFile(path, out);
}

absl::StatusOr<std::vector<std::string>> ReadLines(const std::string& path, int64_t expected) {
  TESSERA_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  std::vector<std::string> lines;
  if (!text.empty()) {
    if (text.back() == '\n') text.pop_back();
    lines = absl::StrSplit(text, '\n');
    for (std::string& l : lines) {
      if (!l.empty() && l.back() == '\r') l.pop_back();
    }
  }
  if (expected >= 0 && static_cast<int64_t>(lines.size()) != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", lines.size(), " lines, expected ", expected, " (one per feature/row)"));
  }
  return lines;
}

// ---------------------------------------------------------------------------
// Subsets

SparseBinaryMatrix SelectRows(const SparseBinaryMatrix& m, absl::Span<const int64_t> rows) {
  SparseBinaryMatrix out(m.cols());
  int64_t nnz = 0;
  for (int64_t r : rows) nnz += m.row(r).size();
  out.Reserve(static_cast<int64_t>(rows.size()), nnz);
  for (int64_t r : rows) out.AppendSortedRow(m.row(r));
  return out;
}

RowSplit SplitRows(int64_t rows, double held_out_fraction, uint64_t seed) {
  std::vector<int64_t> order(rows);
  std::iota(order.begin(), order.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(order.begin(), order.end(), rng);
  const double f = std::min(1.0, std::max(0.0, held_out_fraction));
  const int64_t held = static_cast<int64_t>(std::floor(rows * f));
  RowSplit split;
  split.held_out.assign(order.begin(), order.begin() + held);
  split.train.assign(order.begin() + held, order.end());
  std::sort(split.held_out.begin(), split.held_out.end());
  std::sort(split.train.begin(), split.train.end());
  return split;
}

std::vector<int64_t> FeatureCounts(const SparseBinaryMatrix& m) {
  std::vector<int64_t> counts(m.cols(), 0);
  for (int32_t c : m.indices()) ++counts[c];
  return counts;
}

}  // namespace som
}  // namespace tessera
