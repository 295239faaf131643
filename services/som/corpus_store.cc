#include "services/som/corpus_store.h"

#include <utility>

namespace tessera {
namespace som {

int64_t StoredCorpus::ApproximateBytes() const {
  int64_t bytes = 8 * static_cast<int64_t>(matrix.offsets().size()) + 4 * matrix.nnz();
  for (const auto* strings : {&feature_names, &document_ids}) {
    for (const std::string& s : *strings) bytes += static_cast<int64_t>(sizeof(std::string) + s.size());
  }
  return bytes;
}

absl::StatusOr<CorpusStore::Entry> CorpusStore::Put(std::shared_ptr<const StoredCorpus> corpus) {
  if (corpus == nullptr) return absl::InvalidArgumentError("no corpus");
  const int64_t nbytes = corpus->ApproximateBytes();
  return Put(std::move(corpus), nbytes);
}

}  // namespace som
}  // namespace tessera
