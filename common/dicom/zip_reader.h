// The members of a zip archive, read into memory (stored and deflated
// members; zip64, encryption and other methods are refused). Enough for a
// DICOM series sent as a zip; sizes are checked before any allocation.
#ifndef TESSERA_COMMON_DICOM_ZIP_READER_H_
#define TESSERA_COMMON_DICOM_ZIP_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace tessera::dicom {

struct ZipMember {
  std::string name;   // path inside the archive
  std::string bytes;  // uncompressed content
};

// True when the file starts with a zip local-file or end-of-directory signature.
bool LooksLikeZip(const std::string& path);

// Every regular member (directories skipped). INVALID_ARGUMENT naming the
// archive (and member) when the archive is damaged or uses an unsupported
// feature; RESOURCE_EXHAUSTED when the members would exceed `max_total_bytes`.
absl::StatusOr<std::vector<ZipMember>> ReadZip(const std::string& path,
                                               int64_t max_total_bytes = int64_t{8} << 30);

}  // namespace tessera::dicom

#endif  // TESSERA_COMMON_DICOM_ZIP_READER_H_
