#include "common/dicom/deidentify.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tessera::dicom {
namespace {

std::string Hmac(absl::string_view key, absl::string_view message) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
       message.size(), mac, &n);
  return std::string(reinterpret_cast<const char*>(mac), n);
}

// The decimal digits of a 128-bit unsigned integer.
std::string Decimal128(unsigned __int128 v) {
  if (v == 0) return "0";
  std::string digits;
  while (v != 0) {
    digits.push_back(static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  std::reverse(digits.begin(), digits.end());
  return digits;
}

}  // namespace

std::string DeidentifiedUid(absl::string_view salt, absl::string_view uid) {
  const std::string mac = Hmac(salt, absl::StrCat("uid:", uid));
  unsigned __int128 v = 0;
  for (int i = 0; i < 16; ++i) v = (v << 8) | static_cast<unsigned char>(mac[i]);
  return absl::StrCat("2.25.", Decimal128(v));
}

std::string PatientPseudonym(absl::string_view salt, absl::string_view patient_id) {
  const std::string mac = Hmac(salt, absl::StrCat("patient:", patient_id));
  return absl::StrFormat("ANON-%02X%02X%02X%02X", static_cast<unsigned char>(mac[0]),
                         static_cast<unsigned char>(mac[1]), static_cast<unsigned char>(mac[2]),
                         static_cast<unsigned char>(mac[3]));
}

absl::Status CheckDeidentification(const Deidentification& deidentify) {
  if (deidentify.enabled && deidentify.salt.empty()) {
    return absl::InvalidArgumentError(
        "deidentify: a salt is required (a random secret per job, so that its outputs share new UIDs)");
  }
  return absl::OkStatus();
}

}  // namespace tessera::dicom
