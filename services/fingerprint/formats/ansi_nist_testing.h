// Tests' ANSI/NIST-ITL helpers: NIST's reference transactions in the shared
// data (both encodings' tests round-trip every one of them) and builders of
// the fields of hand-written transactions.
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_TESTING_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_TESTING_H_

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "services/fingerprint/formats/ansi_nist.h"
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

// A text field of subfields, of one value, and the binary data field (x.999).
inline ansi_nist::Field F(int number, std::vector<ansi_nist::Subfield> subfields) {
  ansi_nist::Field f;
  f.number = number;
  f.subfields = std::move(subfields);
  return f;
}
inline ansi_nist::Field V(int number, const std::string& value) { return F(number, {{value}}); }
inline ansi_nist::Field Data(const std::string& bytes) {
  ansi_nist::Field f;
  f.number = ansi_nist::kDataField;
  f.is_binary = true;
  f.binary = bytes;
  return f;
}

// The transaction without what the writers recompute (LEN, and the Type-1 CNT).
inline ansi_nist::Transaction WithoutDerived(ansi_nist::Transaction t) {
  for (ansi_nist::Record& r : t.records) {
    std::vector<ansi_nist::Field> kept;
    for (ansi_nist::Field& f : r.fields) {
      if (f.number == ansi_nist::kLenField || (r.type == 1 && f.number == 3)) continue;
      kept.push_back(std::move(f));
    }
    r.fields = std::move(kept);
  }
  return t;
}

}  // namespace ansi_nist_testing
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_ANSI_NIST_TESTING_H_
