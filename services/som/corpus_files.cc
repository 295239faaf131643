#include "services/som/corpus_files.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace tessera {
namespace som {

int64_t StoredCorpus::ApproximateBytes() const {
  int64_t bytes = 8 * static_cast<int64_t>(matrix.offsets().size()) + 4 * matrix.nnz();
  for (const auto* strings : {&feature_names, &document_ids}) {
    for (const std::string& s : *strings) bytes += static_cast<int64_t>(sizeof(std::string) + s.size());
  }
  return bytes;
}

std::string StoredCorpus::DocumentId(int64_t row) const {
  const bool named = row < static_cast<int64_t>(document_ids.size()) && !document_ids[row].empty();
  return named ? document_ids[row] : absl::StrCat("d", row);
}

absl::Status CheckIndexBase(int index_base) {
  if (index_base != 0 && index_base != 1) {
    return absl::InvalidArgumentError(absl::StrCat("index_base ", index_base, " must be 0 or 1"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ReadFeatureNames(const std::string& path) {
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::string> lines, ReadLines(path));
  for (std::string& line : lines) {
    if (line.find('\t') == std::string::npos) continue;
    std::vector<std::string> fields = absl::StrSplit(line, '\t');
    const std::string& last = fields.back();
    line = last.empty() || fields.size() < 2 ? fields[0] : absl::StrCat(fields[0], " ", last);
  }
  return lines;
}

absl::StatusOr<std::shared_ptr<const StoredCorpus>> ReadCorpusFiles(const CorpusFiles& files) {
  TESSERA_RETURN_IF_ERROR(CheckIndexBase(files.index_base));
  auto corpus = std::make_shared<StoredCorpus>();
  LibsvmOptions libsvm;
  libsvm.index_base = files.index_base;
  if (!files.feature_names.empty()) {
    absl::StatusOr<std::vector<std::string>> names = ReadFeatureNames(files.feature_names);
    if (!names.ok()) return Annotate(names.status(), "feature names");
    corpus->feature_names = *std::move(names);
    libsvm.num_features = static_cast<int64_t>(corpus->feature_names.size());
  }
  absl::StatusOr<SparseBinaryMatrix> matrix = ReadCorpus(files.corpus, libsvm);
  if (!matrix.ok()) return Annotate(matrix.status(), absl::StrCat("corpus '", files.corpus, "'"));
  corpus->matrix = *std::move(matrix);
  if (!corpus->feature_names.empty() &&
      static_cast<int64_t>(corpus->feature_names.size()) != corpus->matrix.cols()) {
    return absl::InvalidArgumentError(absl::StrCat("'", files.feature_names, "' has ", corpus->feature_names.size(),
                                                   " feature names; the corpus has ", corpus->matrix.cols(),
                                                   " features"));
  }
  if (!files.document_ids.empty()) {
    absl::StatusOr<std::vector<std::string>> ids = ReadLines(files.document_ids, corpus->matrix.rows());
    if (!ids.ok()) return Annotate(ids.status(), "document ids");
    corpus->document_ids = *std::move(ids);
  }
  return std::shared_ptr<const StoredCorpus>(std::move(corpus));
}

}  // namespace som
}  // namespace tessera
