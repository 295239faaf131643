#include "services/som/corpus_store.h"

#include <utility>

namespace tessera {
namespace som {

absl::StatusOr<CorpusStore::Entry> CorpusStore::Put(std::shared_ptr<const StoredCorpus> corpus) {
  if (corpus == nullptr) return absl::InvalidArgumentError("no corpus");
  const int64_t nbytes = corpus->ApproximateBytes();
  return Put(std::move(corpus), nbytes);
}

}  // namespace som
}  // namespace tessera
