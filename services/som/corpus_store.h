// Corpora uploaded to SomAtlasService (UploadCorpus) and held in server
// memory under an id for later CreateAtlas calls. Bounded in total bytes and
// entries; an entry expires `ttl` after its last use. Thread-safe. A corpus
// handed out by Get() is shared, so a job keeps using it after it expires.
#ifndef TESSERA_SERVICES_SOM_CORPUS_STORE_H_
#define TESSERA_SERVICES_SOM_CORPUS_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "services/som/corpus.h"

namespace tessera {
namespace som {

struct StoredCorpus {
  SparseBinaryMatrix matrix;
  std::vector<std::string> feature_names;  // empty or one per column
  std::vector<std::string> document_ids;   // empty or one per row ("" entries allowed)

  // What holding it costs: the CSR arrays plus the strings.
  int64_t ApproximateBytes() const;
};

class CorpusStore {
 public:
  struct Options {
    int64_t max_total_bytes = int64_t{8} << 30;
    absl::Duration ttl = absl::Minutes(30);
    int max_entries = 256;
  };
  struct Entry {
    std::string id;
    int64_t nbytes = 0;
    absl::Time expires;
  };

  explicit CorpusStore(Options options) : options_(options) {}
  CorpusStore(const CorpusStore&) = delete;
  CorpusStore& operator=(const CorpusStore&) = delete;

  // Bytes a new corpus may still take (after dropping expired entries); 0
  // when the entry count is at its limit.
  int64_t FreeBytes();
  // Stores the corpus under a new random id ("corpus-..."). RESOURCE_EXHAUSTED
  // when it does not fit or the entry count is at its limit.
  absl::StatusOr<Entry> Put(std::shared_ptr<const StoredCorpus> corpus);
  // The corpus, renewing its expiry. NOT_FOUND for unknown or expired ids.
  absl::StatusOr<std::shared_ptr<const StoredCorpus>> Get(const std::string& id);
  bool Remove(const std::string& id);

  int64_t used_bytes() const;
  const Options& options() const { return options_; }

 private:
  struct Stored {
    std::shared_ptr<const StoredCorpus> corpus;
    int64_t nbytes = 0;
    absl::Time expires;
  };
  void DropExpiredLocked(absl::Time now);

  const Options options_;
  mutable std::mutex mu_;
  std::map<std::string, Stored> entries_;
  int64_t stored_bytes_ = 0;
};

}  // namespace som
}  // namespace tessera

#endif  // TESSERA_SERVICES_SOM_CORPUS_STORE_H_
