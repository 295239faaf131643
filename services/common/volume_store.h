// Volumes uploaded by clients and held in server memory under an id for later
// requests (e.g. RegistrationService.UploadVolume, then Register by
// upload_id): an UploadStore (upload_store.h) of Volumes, bounded in total
// bytes, each entry expiring `ttl` after its last use. Thread-safe.
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
#include <utility>

#include "absl/status/statusor.h"
#include "common/volume.h"
#include "services/common/upload_store.h"

namespace tessera {

class VolumeStore : public UploadStore<Volume> {
 public:
  explicit VolumeStore(Options options) : UploadStore(options, UploadKind{"volume", "volumes", "up-"}) {}

  using UploadStore::Commit;
  // Stores `volume` (its bytes must not exceed the reservation's) under a new
  // random id.
  absl::StatusOr<Entry> Commit(Reservation reservation, Volume volume) {
    const int64_t nbytes = static_cast<int64_t>(volume.data.nbytes());
    return Commit(std::move(reservation), std::move(volume), nbytes);
  }
};

}  // namespace tessera

#endif  // TESSERA_SERVICES_COMMON_VOLUME_STORE_H_
