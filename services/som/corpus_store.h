// Corpora uploaded to SomAtlasService (UploadCorpus) and held in server
// memory under an id for later CreateAtlas calls: an UploadStore
// (services/common/upload_store.h) bounded in total bytes and entries, each
// entry expiring `ttl` after its last use. Thread-safe. A corpus handed out by
// Get() is shared, so a job keeps using it after it expires.
#ifndef TESSERA_SERVICES_SOM_CORPUS_STORE_H_
#define TESSERA_SERVICES_SOM_CORPUS_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/common/upload_store.h"
#include "services/som/corpus_files.h"

namespace tessera {
namespace som {

class CorpusStore : public UploadStore<std::shared_ptr<const StoredCorpus>> {
 public:
  explicit CorpusStore(Options options) : UploadStore(options, UploadKind{"corpus", "corpora", "corpus-"}) {}

  using UploadStore::Put;
  // Stores the corpus under a new random id ("corpus-..."). RESOURCE_EXHAUSTED
  // when it does not fit or the entry count is at its limit.
  absl::StatusOr<Entry> Put(std::shared_ptr<const StoredCorpus> corpus);
};

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_CORPUS_STORE_H_
