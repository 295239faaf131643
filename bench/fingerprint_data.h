// Where a fingerprint benchmark finds the shared FVC2002 data: its --data
// flag, or FindFingerprintDataDir(). Benchmarks that need the data stop with
// the places tried when it is not there.
#ifndef TESSERA_BENCH_FINGERPRINT_DATA_H_
#define TESSERA_BENCH_FINGERPRINT_DATA_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "services/fingerprint/formats/fvc_data.h"

namespace tessera::fingerprint {

// `given` when not empty; else the found directory; else prints why and exits 1.
inline std::string FingerprintDataDirOrExit(const std::string& given) {
  if (!given.empty()) return given;
  absl::StatusOr<std::string> found = FindFingerprintDataDir();
  if (!found.ok()) {
    std::fprintf(stderr, "%s\n", std::string(found.status().message()).c_str());
    std::exit(1);
  }
  return *found;
}

}  // namespace tessera::fingerprint

#endif  // TESSERA_BENCH_FINGERPRINT_DATA_H_
