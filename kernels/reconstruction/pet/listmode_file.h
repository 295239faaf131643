// TSLM: Tessera's list-mode file, little-endian throughout.
//
//   offset  size  field
//   0       4     magic "TSLM"
//   4       4     version (u32) = 1
//   8       8     num_events (u64)
//   16      4     num_tof_bins (u32), K >= 1 (1: no TOF)
//   20      4     tof_bin_mm (f32)   TOF bin width (pet_geometry.h), 0 without TOF
//   24      4     tof_fwhm_mm (f32)  TOF kernel FWHM, 0 without TOF
//   28      4     reserved, 0
//   32      12 * num_events: events, each
//             0  view (u32)     projection index in the geometry
//             4  col (u16)      detector column
//             6  row (u16)      detector row (0 in 2-D)
//             8  tof_bin (i16)  signed, centre 0: bin index k = tof_bin + K / 2
//                               (integer division; 0 without TOF)
//             10 weight (u16)   prompt counts the record stands for: 1 for one
//                               prompt coincidence, 0 for a delayed one
//                               (randoms; reconstruction skips it), > 1 for
//                               pre-merged duplicates
// The file is exactly 32 + 12 * num_events bytes. Readers check every field
// and, given a geometry, every event's indices; errors name the event.
#ifndef TESSERA_KERNELS_RECONSTRUCTION_PET_LISTMODE_FILE_H_
#define TESSERA_KERNELS_RECONSTRUCTION_PET_LISTMODE_FILE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/reconstruction/pet/pet_geometry.h"

namespace tessera {
namespace recon {
namespace pet {

// In memory the same 12 bytes (no padding), so event arrays go to the GPU as is.
struct ListModeEvent {
  uint32_t view = 0;
  uint16_t col = 0;
  uint16_t row = 0;
  int16_t tof_bin = 0;
  uint16_t weight = 1;
};
static_assert(sizeof(ListModeEvent) == 12, "ListModeEvent must be 12 bytes");

constexpr uint32_t kListModeVersion = 1;
constexpr int64_t kListModeHeaderBytes = 32;
constexpr int64_t kListModeEventBytes = 12;

struct ListModeHeader {
  uint32_t version = kListModeVersion;
  uint64_t num_events = 0;
  uint32_t num_tof_bins = 1;
  float tof_bin_mm = 0;
  float tof_fwhm_mm = 0;
};

struct ListModeData {
  ListModeHeader header;
  std::vector<ListModeEvent> events;
};

// The header for events of `geometry` (its TOF fields).
ListModeHeader ListModeHeaderFor(const PetGeometry& geometry);

// TOF bin index k of an event for K bins (may be out of [0, K) if invalid).
TESSERA_RECON_HD inline int TofIndex(const ListModeEvent& e, int num_tof_bins) {
  return e.tof_bin + num_tof_bins / 2;
}

// Bytes of a TSLM file (num_events is taken from events.size()).
std::string EncodeListMode(const ListModeHeader& header, const std::vector<ListModeEvent>& events);
// Parses and checks a whole file's bytes (format only, or against `geometry`
// when given): INVALID_ARGUMENT for a bad magic, version, reserved field, TOF
// field, a size that does not match num_events (truncated, naming the first
// incomplete event, or trailing bytes), or an event out of range.
absl::StatusOr<ListModeData> DecodeListMode(absl::string_view bytes, const PetGeometry* geometry = nullptr);

absl::Status WriteListModeFile(const std::string& path, const ListModeHeader& header,
                               const std::vector<ListModeEvent>& events);
// Streams the file (no second copy of its bytes); errors as DecodeListMode,
// NOT_FOUND when it cannot be opened.
absl::StatusOr<ListModeData> ReadListModeFile(const std::string& path, const PetGeometry* geometry = nullptr);

// Only the header (32 bytes read), checked against the file's size as
// ReadListModeFile does: cheap checks at submit time.
absl::StatusOr<ListModeHeader> ReadListModeHeader(const std::string& path);

// The header's TOF fields against the geometry (bins equal; width and FWHM
// within 1e-4 relative when K > 1).
absl::Status CheckListModeHeader(const ListModeHeader& header, const PetGeometry& geometry);
// Every event's view, col, row and TOF bin within the geometry:
// "event 12: view 500 out of range [0, 180)". `first_index` numbers the events.
absl::Status CheckListModeEvents(const ListModeEvent* events, int64_t n, const PetGeometry& geometry,
                                 int64_t first_index = 0);

}  // namespace pet
}  // namespace recon
}  // namespace tessera

#endif  // TESSERA_KERNELS_RECONSTRUCTION_PET_LISTMODE_FILE_H_
