// A corpus together with its feature names and document ids — uploaded to
// SomAtlasService, or read from files for `tessera som train` and server-side
// training — and the reading of such a set of files.
//
// Feature names: one per line; a tab-separated line (go_features.tsv:
// "GO:0005634<TAB>CC<TAB>nucleus") becomes "<first field> <last field>"
// ("GO:0005634 nucleus"). With names, a libsvm corpus may not index past them.
// Document ids: one per corpus row; rows without one are called "d<row>".
#ifndef TESSERA_SERVICES_SOM_CORPUS_FILES_H_
#define TESSERA_SERVICES_SOM_CORPUS_FILES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/som/corpus.h"

namespace tessera {
namespace som {

struct StoredCorpus {
  SparseBinaryMatrix matrix;
  std::vector<std::string> feature_names;  // empty or one per column
  std::vector<std::string> document_ids;   // empty or one per row ("" entries allowed)
  // What holding it costs: the CSR arrays plus the strings.
  int64_t ApproximateBytes() const;
  // The id of `row`: its own when given and not empty, else "d<row>".
  std::string DocumentId(int64_t row) const;
};

struct CorpusFiles {
  std::string corpus;          // .csr binary CSR; anything else libsvm/svmlight text
  std::string feature_names;   // optional
  std::string document_ids;    // optional
  int index_base = 1;          // libsvm indices (0 or 1)
};

// INVALID_ARGUMENT unless 0 or 1.
absl::Status CheckIndexBase(int index_base);

// One name per line, tab-separated lines shortened as above.
absl::StatusOr<std::vector<std::string>> ReadFeatureNames(const std::string& path);

// Reads the corpus and, when given, its names and ids. Errors name the file:
// INVALID_ARGUMENT when the counts disagree with the corpus, NOT_FOUND for a
// missing file, the corpus readers' statuses otherwise.
absl::StatusOr<std::shared_ptr<const StoredCorpus>> ReadCorpusFiles(const CorpusFiles& files);

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_CORPUS_FILES_H_
