// The keyed values of DICOM de-identification (Deidentification in
// dicom_writer.h): replacement UIDs and patient pseudonyms that are the same
// for every output of one job (one salt) and cannot be mapped back without
// the salt. The writers apply the rest of the profile (dicom_write_common.h).
#ifndef TESSERA_COMMON_DICOM_DEIDENTIFY_H_
#define TESSERA_COMMON_DICOM_DEIDENTIFY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/dicom/dicom_writer.h"

namespace tessera::dicom {

// "2.25." + the first 128 bits of HMAC-SHA-256(salt, "uid:" + uid) as a
// decimal integer (PS3.5 B.2: a UUID-derived UID, at most 44 characters).
std::string DeidentifiedUid(absl::string_view salt, absl::string_view uid);

// "ANON-" + 8 upper-case hex digits of HMAC-SHA-256(salt, "patient:" + id).
std::string PatientPseudonym(absl::string_view salt, absl::string_view patient_id);

// INVALID_ARGUMENT when enabled without a salt.
absl::Status CheckDeidentification(const Deidentification& deidentify);

}  // namespace tessera::dicom

#endif  // TESSERA_COMMON_DICOM_DEIDENTIFY_H_
