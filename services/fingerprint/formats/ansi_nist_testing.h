// Tests' access to NIST's reference ANSI/NIST-ITL transactions in the shared
// data (both encodings' tests round-trip every one of them).
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_TESTING_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_TESTING_H_

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "services/fingerprint/formats/fvc_data.h"

namespace tessera {
namespace fingerprint {
namespace ansi_nist_testing {

inline std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// name -> bytes of every NIST transaction in the shared data (empty without it).
inline std::map<std::string, std::string> NistFiles() {
  std::map<std::string, std::string> files;
  auto dir = FindFingerprintDataDir();
  if (!dir.ok()) return files;
  for (const char* sub : {"nist/ansi-nist-reference", "nist/libbiomeval"}) {
    const std::filesystem::path d = std::filesystem::path(*dir) / sub;
    if (!std::filesystem::is_directory(d)) continue;
    for (const auto& e : std::filesystem::directory_iterator(d)) {
      const std::string ext = e.path().extension().string();
      if (ext == ".an2" || ext == ".an2k") files[e.path().filename().string()] = ReadBytes(e.path().string());
    }
  }
  return files;
}

}  // namespace ansi_nist_testing
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_TESTING_H_
