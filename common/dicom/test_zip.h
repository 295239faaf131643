// Test helper: a zip archive (deflated members, zlib) made in memory, so
// tests zip DICOM series without an external tool.
#ifndef TESSERA_COMMON_DICOM_TEST_ZIP_H_
#define TESSERA_COMMON_DICOM_TEST_ZIP_H_

#include <string>
#include <utility>
#include <vector>

namespace tessera::dicom {

// The bytes of a zip holding `files` (name, bytes) in order; empty when zlib
// fails.
std::string ZipBytes(const std::vector<std::pair<std::string, std::string>>& files);

}  // namespace tessera::dicom

#endif  // TESSERA_COMMON_DICOM_TEST_ZIP_H_
