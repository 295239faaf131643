#include "services/som/corpus_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "services/common/random_id.h"

namespace tessera {
namespace som {

int64_t StoredCorpus::ApproximateBytes() const {
  int64_t bytes = 8 * static_cast<int64_t>(matrix.offsets().size()) + 4 * matrix.nnz();
  for (const auto* strings : {&feature_names, &document_ids}) {
    for (const std::string& s : *strings) bytes += static_cast<int64_t>(sizeof(std::string) + s.size());
  }
  return bytes;
}

void CorpusStore::DropExpiredLocked(absl::Time now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.expires <= now) {
      stored_bytes_ -= it->second.nbytes;
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

int64_t CorpusStore::FreeBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  DropExpiredLocked(absl::Now());
  if (static_cast<int64_t>(entries_.size()) >= options_.max_entries) return 0;
  return options_.max_total_bytes - stored_bytes_;
}

absl::StatusOr<CorpusStore::Entry> CorpusStore::Put(std::shared_ptr<const StoredCorpus> corpus) {
  if (corpus == nullptr) return absl::InvalidArgumentError("no corpus");
  const int64_t nbytes = corpus->ApproximateBytes();
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  DropExpiredLocked(now);
  if (static_cast<int64_t>(entries_.size()) >= options_.max_entries) {
    return absl::ResourceExhaustedError(absl::StrCat("the server already holds ", options_.max_entries,
                                                     " uploaded corpora; use them or wait for them to expire"));
  }
  if (nbytes > options_.max_total_bytes - stored_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the corpus store is full: ", nbytes, " bytes needed, ", options_.max_total_bytes - stored_bytes_,
                     " of ", options_.max_total_bytes, " free (uploads expire ", absl::FormatDuration(options_.ttl),
                     " after last use)"));
  }
  Entry entry{RandomId("corpus-"), nbytes, now + options_.ttl};
  stored_bytes_ += nbytes;
  entries_[entry.id] = Stored{std::move(corpus), nbytes, entry.expires};
  return entry;
}

absl::StatusOr<std::shared_ptr<const StoredCorpus>> CorpusStore::Get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  DropExpiredLocked(now);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("no uploaded corpus '", id, "' (unknown, or expired after ",
                                            absl::FormatDuration(options_.ttl), " unused)"));
  }
  it->second.expires = now + options_.ttl;
  return it->second.corpus;
}

bool CorpusStore::Remove(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  stored_bytes_ -= it->second.nbytes;
  entries_.erase(it);
  return true;
}

int64_t CorpusStore::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stored_bytes_;
}

}  // namespace som
}  // namespace tessera
