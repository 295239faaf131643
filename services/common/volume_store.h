// Volumes uploaded by clients and held in server memory under an id for later
// requests (e.g. RegistrationService.UploadVolume, then Register by
// upload_id). Bounded in total bytes; an entry expires `ttl` after its last
// use. Thread-safe.
//
//   VolumeStore store({.max_total_bytes = 8 << 30, .ttl = absl::Minutes(30)});
//   TESSERA_ASSIGN_OR_RETURN(VolumeStore::Reservation space, store.Reserve(nbytes));
//   ... receive the data ...
//   TESSERA_ASSIGN_OR_RETURN(VolumeStore::Entry entry, store.Commit(std::move(space), std::move(volume)));
//   ... later: TESSERA_ASSIGN_OR_RETURN(Volume v, store.Get(entry.id));
//
// A Volume handed out by Get() shares the stored array (NDArray copies share
// storage), so a job can keep using it after the entry expires; only the
// store's own bytes are counted.
#ifndef TESSERA_SERVICES_COMMON_VOLUME_STORE_H_
#define TESSERA_SERVICES_COMMON_VOLUME_STORE_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/volume.h"

namespace tessera {

class VolumeStore {
 public:
  struct Options {
    int64_t max_total_bytes = int64_t{8} << 30;
    absl::Duration ttl = absl::Minutes(30);
    int max_entries = 1024;
  };

  // Space set aside for an upload in progress; given back when destroyed
  // unless committed. Must not outlive the store.
  class Reservation {
   public:
    Reservation() = default;
    Reservation(Reservation&& other) noexcept { *this = std::move(other); }
    Reservation& operator=(Reservation&& other) noexcept;
    ~Reservation();
    int64_t bytes() const { return bytes_; }

   private:
    friend class VolumeStore;
    Reservation(VolumeStore* store, int64_t bytes) : store_(store), bytes_(bytes) {}
    VolumeStore* store_ = nullptr;
    int64_t bytes_ = 0;
  };

  struct Entry {
    std::string id;
    int64_t nbytes = 0;
    absl::Time expires;
  };

  explicit VolumeStore(Options options);
  VolumeStore(const VolumeStore&) = delete;
  VolumeStore& operator=(const VolumeStore&) = delete;

  // Sets aside `nbytes` after dropping expired entries. RESOURCE_EXHAUSTED
  // when they do not fit (or the entry count is at its limit).
  absl::StatusOr<Reservation> Reserve(int64_t nbytes);
  // Stores `volume` (its bytes must not exceed the reservation's) under a new
  // random id.
  absl::StatusOr<Entry> Commit(Reservation reservation, Volume volume);
  // The volume, renewing its expiry. NOT_FOUND for unknown or expired ids.
  absl::StatusOr<Volume> Get(const std::string& id);
  // Drops an entry; false when there was none.
  bool Remove(const std::string& id);

  int64_t used_bytes() const;  // stored plus reserved
  int64_t max_total_bytes() const { return options_.max_total_bytes; }
  absl::Duration ttl() const { return options_.ttl; }

 private:
  struct Stored {
    Volume volume;
    int64_t nbytes = 0;
    absl::Time expires;
  };
  void Release(int64_t bytes);
  void DropExpiredLocked(absl::Time now);

  const Options options_;
  mutable std::mutex mu_;
  std::map<std::string, Stored> entries_;
  int64_t stored_bytes_ = 0;
  int64_t reserved_bytes_ = 0;
  int reservations_ = 0;
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_COMMON_VOLUME_STORE_H_
