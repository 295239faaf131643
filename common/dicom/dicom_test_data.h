// Test helper: the DICOM test series directory (../shared/data/dicom beside
// the source tree, or $TESSERA_DICOM_DATA); empty when absent (tests skip).
#ifndef TESSERA_COMMON_DICOM_DICOM_TEST_DATA_H_
#define TESSERA_COMMON_DICOM_DICOM_TEST_DATA_H_

#include <string>

namespace tessera::dicom {

std::string DicomTestDataDir();

}  // namespace tessera::dicom

#endif  // TESSERA_COMMON_DICOM_DICOM_TEST_DATA_H_
