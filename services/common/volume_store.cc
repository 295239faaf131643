#include "services/common/volume_store.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "services/common/random_id.h"

namespace tessera {

VolumeStore::Reservation& VolumeStore::Reservation::operator=(Reservation&& other) noexcept {
  if (this != &other) {
    if (store_ != nullptr) store_->Release(bytes_);
    store_ = other.store_;
    bytes_ = other.bytes_;
    other.store_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

VolumeStore::Reservation::~Reservation() {
  if (store_ != nullptr) store_->Release(bytes_);
}

VolumeStore::VolumeStore(Options options) : options_(options) {}

void VolumeStore::Release(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  reserved_bytes_ -= bytes;
  --reservations_;
}

void VolumeStore::DropExpiredLocked(absl::Time now) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.expires <= now) {
      stored_bytes_ -= it->second.nbytes;
      it = entries_.erase(it);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<VolumeStore::Reservation> VolumeStore::Reserve(int64_t nbytes) {
  if (nbytes < 0) return absl::InvalidArgumentError("negative size");
  std::lock_guard<std::mutex> lock(mu_);
  DropExpiredLocked(absl::Now());
  if (static_cast<int64_t>(entries_.size()) + reservations_ >= options_.max_entries) {
    return absl::ResourceExhaustedError(absl::StrCat("the server already holds ", options_.max_entries,
                                                     " uploaded volumes; use them or wait for them to expire"));
  }
  const int64_t used = stored_bytes_ + reserved_bytes_;
  if (nbytes > options_.max_total_bytes - used) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the upload store is full: ", nbytes, " bytes requested, ", options_.max_total_bytes - used, " of ",
        options_.max_total_bytes, " free (uploads expire ", absl::FormatDuration(options_.ttl), " after last use)"));
  }
  reserved_bytes_ += nbytes;
  ++reservations_;
  return Reservation(this, nbytes);
}

absl::StatusOr<VolumeStore::Entry> VolumeStore::Commit(Reservation reservation, Volume volume) {
  if (reservation.store_ != this) return absl::InvalidArgumentError("reservation from another store");
  const int64_t nbytes = static_cast<int64_t>(volume.data.nbytes());
  if (nbytes > reservation.bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("volume of ", nbytes, " bytes exceeds its reservation of ", reservation.bytes_));
  }
  Entry entry;
  entry.id = RandomId("up-");
  entry.nbytes = nbytes;
  std::lock_guard<std::mutex> lock(mu_);
  entry.expires = absl::Now() + options_.ttl;
  // The reservation's bytes become stored bytes.
  reserved_bytes_ -= reservation.bytes_;
  --reservations_;
  reservation.store_ = nullptr;
  stored_bytes_ += nbytes;
  entries_[entry.id] = Stored{std::move(volume), nbytes, entry.expires};
  return entry;
}

absl::StatusOr<Volume> VolumeStore::Get(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const absl::Time now = absl::Now();
  DropExpiredLocked(now);
  auto it = entries_.find(id);
  if (it == entries_.end()) {
    return absl::NotFoundError(absl::StrCat("no uploaded volume '", id, "' (unknown, or expired ",
                                            absl::FormatDuration(options_.ttl), " after its last use)"));
  }
  it->second.expires = now + options_.ttl;
  return it->second.volume;
}

bool VolumeStore::Remove(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  stored_bytes_ -= it->second.nbytes;
  entries_.erase(it);
  return true;
}

int64_t VolumeStore::used_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stored_bytes_ + reserved_bytes_;
}

}  // namespace tessera
