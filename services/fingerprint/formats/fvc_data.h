// Locating and loading the shared fingerprint data (../shared/data/fingerprint
// next to the project root, see /work/shared/data/README.md): FVC2002 DB1-DB4
// set B as ISO 19794-2 templates, 10 fingers (101-110) x 8 impressions each.
// Used by tests, the accuracy evaluation and the benchmarks.
#ifndef TESSERA_SERVICES_FINGERPRINT_FORMATS_FVC_DATA_H_
#define TESSERA_SERVICES_FINGERPRINT_FORMATS_FVC_DATA_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/fingerprint/formats/template.h"

namespace tessera {
namespace fingerprint {

// The fingerprint data directory (the one holding fvc2002/ and invalid/):
// $TESSERA_FINGERPRINT_DATA when set; else ../shared/data/fingerprint
// relative to the project root, found from the working directory, from a
// Bazel runfile that links back into the source tree (tests list
// //services/fingerprint:BUILD as data), next to a gathered GPU binary
// (<dir>/bin/<binary> -> <dir>/data/fingerprint), or at
// /work/shared/data/fingerprint.
// NOT_FOUND, listing the places tried, when none exists.
absl::StatusOr<std::string> FindFingerprintDataDir();

struct FvcImpression {
  int finger = 0;      // 101..110
  int impression = 0;  // 1..8
  std::string path;
  Template view;  // the record's single finger view
};

// DB `db` (1-4) set B, ordered by finger then impression: 80 templates.
absl::StatusOr<std::vector<FvcImpression>> LoadFvc2002(const std::string& data_dir, int db);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_FORMATS_FVC_DATA_H_
