// Uploads held in server memory under a random id for later requests (a
// volume for RegistrationService.Register, a corpus for
// SomAtlasService.CreateAtlas). Bounded in total bytes and in entries; an
// entry expires `ttl` after its last use. Space can be reserved before the
// data arrives (a streamed upload), so a full store fails the upload early.
// Thread-safe. Values are handed out by copy: use a cheaply copied T (an
// NDArray-backed Volume, a shared_ptr) so a job keeps its data after expiry.
//
//   UploadStore<Volume> store(options, {"volume", "volumes", "up-"});
//   TESSERA_ASSIGN_OR_RETURN(auto space, store.Reserve(nbytes));
//   ... receive ...
//   TESSERA_ASSIGN_OR_RETURN(auto entry, store.Commit(std::move(space), std::move(value), nbytes));
//   TESSERA_ASSIGN_OR_RETURN(Volume v, store.Get(entry.id));
#ifndef TESSERA_SERVICES_COMMON_UPLOAD_STORE_H_
#define TESSERA_SERVICES_COMMON_UPLOAD_STORE_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "services/common/random_id.h"

namespace tessera {

struct UploadStoreOptions {
  int64_t max_total_bytes = int64_t{8} << 30;
  absl::Duration ttl = absl::Minutes(30);
  int max_entries = 1024;
};

// How a store names what it holds, in its error messages and ids.
struct UploadKind {
  const char* singular;   // "volume"
  const char* plural;     // "volumes"
  const char* id_prefix;  // "up-"
};

template <typename T>
class UploadStore {
 public:
  using Options = UploadStoreOptions;

  // Space set aside for an upload in progress; given back when destroyed
  // unless committed. Must not outlive the store.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept { *this = std::move(other); }
    Reservation& operator=(Reservation&& other) noexcept {
      if (this != &other) {
        if (store_ != nullptr) store_->Release(bytes_);
        store_ = other.store_;
        bytes_ = other.bytes_;
        other.store_ = nullptr;
        other.bytes_ = 0;
      }
      return *this;
    }
    ~Reservation() {
      if (store_ != nullptr) store_->Release(bytes_);
    }
    int64_t bytes() const { return bytes_; }

   private:
    friend class UploadStore;
    Reservation(UploadStore* store, int64_t bytes) : store_(store), bytes_(bytes) {}
    UploadStore* store_ = nullptr;
    int64_t bytes_ = 0;
  };

  struct Entry {
    std::string id;
    int64_t nbytes = 0;
    absl::Time expires;
  };

  UploadStore(Options options, UploadKind kind) : options_(options), kind_(kind) {}
  UploadStore(const UploadStore&) = delete;
  UploadStore& operator=(const UploadStore&) = delete;

  // Sets aside `nbytes` after dropping expired entries. RESOURCE_EXHAUSTED
  // when they do not fit (or the entry count is at its limit).
  absl::StatusOr<Reservation> Reserve(int64_t nbytes) {
    if (nbytes < 0) return absl::InvalidArgumentError("negative size");
    std::lock_guard<std::mutex> lock(mu_);
    DropExpiredLocked(absl::Now());
    if (static_cast<int64_t>(entries_.size()) + reservations_ >= options_.max_entries) {
      return absl::ResourceExhaustedError(absl::StrCat("the server already holds ", options_.max_entries,
                                                       " uploaded ", kind_.plural,
                                                       "; use them or wait for them to expire"));
    }
    const int64_t used = stored_bytes_ + reserved_bytes_;
    if (nbytes > options_.max_total_bytes - used) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the upload store for ", kind_.plural, " is full: ", nbytes, " bytes requested, ",
          options_.max_total_bytes - used, " of ", options_.max_total_bytes, " free (uploads expire ",
          absl::FormatDuration(options_.ttl), " after last use)"));
    }
    reserved_bytes_ += nbytes;
    ++reservations_;
    return Reservation(this, nbytes);
  }

  // Stores `value` of `nbytes` (at most the reservation's) under a new id.
  absl::StatusOr<Entry> Commit(Reservation reservation, T value, int64_t nbytes) {
    if (reservation.store_ != this) return absl::InvalidArgumentError("reservation from another store");
    if (nbytes > reservation.bytes_) {
      return absl::InvalidArgumentError(absl::StrCat(kind_.singular, " of ", nbytes,
                                                     " bytes exceeds its reservation of ", reservation.bytes_));
    }
    Entry entry{RandomId(kind_.id_prefix), nbytes, absl::Time()};
    std::lock_guard<std::mutex> lock(mu_);
    entry.expires = absl::Now() + options_.ttl;
    // The reservation's bytes become stored bytes.
    reserved_bytes_ -= reservation.bytes_;
    --reservations_;
    reservation.store_ = nullptr;
    stored_bytes_ += nbytes;
    entries_[entry.id] = Stored{std::move(value), nbytes, entry.expires};
    return entry;
  }

  // Reserve + Commit for data that is already complete.
  absl::StatusOr<Entry> Put(T value, int64_t nbytes) {
    absl::StatusOr<Reservation> space = Reserve(nbytes);
    if (!space.ok()) return space.status();
    return Commit(*std::move(space), std::move(value), nbytes);
  }

  // The value, renewing its expiry. NOT_FOUND for unknown or expired ids.
  absl::StatusOr<T> Get(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    const absl::Time now = absl::Now();
    DropExpiredLocked(now);
    auto it = entries_.find(id);
    if (it == entries_.end()) {
      return absl::NotFoundError(absl::StrCat("no uploaded ", kind_.singular, " '", id, "' (unknown, or expired ",
                                              absl::FormatDuration(options_.ttl), " after its last use)"));
    }
    it->second.expires = now + options_.ttl;
    return it->second.value;
  }

  // Drops an entry; false when there was none.
  bool Remove(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return false;
    stored_bytes_ -= it->second.nbytes;
    entries_.erase(it);
    return true;
  }

  // Bytes a new upload may still take (after dropping expired entries); 0
  // when the entry count is at its limit.
  int64_t FreeBytes() {
    std::lock_guard<std::mutex> lock(mu_);
    DropExpiredLocked(absl::Now());
    if (static_cast<int64_t>(entries_.size()) + reservations_ >= options_.max_entries) return 0;
    return options_.max_total_bytes - stored_bytes_ - reserved_bytes_;
  }

  int64_t used_bytes() const {  // stored plus reserved
    std::lock_guard<std::mutex> lock(mu_);
    return stored_bytes_ + reserved_bytes_;
  }
  const Options& options() const { return options_; }
  int64_t max_total_bytes() const { return options_.max_total_bytes; }
  absl::Duration ttl() const { return options_.ttl; }

 private:
  struct Stored {
    T value;
    int64_t nbytes = 0;
    absl::Time expires;
  };

  void Release(int64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    reserved_bytes_ -= bytes;
    --reservations_;
  }

  void DropExpiredLocked(absl::Time now) {
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.expires <= now) {
        stored_bytes_ -= it->second.nbytes;
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }

  const Options options_;
  const UploadKind kind_;
  mutable std::mutex mu_;
  std::map<std::string, Stored> entries_;
  int64_t stored_bytes_ = 0;
  int64_t reserved_bytes_ = 0;
  int reservations_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_COMMON_UPLOAD_STORE_H_
