// Test inputs for the fingerprint kernels: the real FVC2002 templates when
// the shared data is available (services/fingerprint/formats/fvc_data.h), and
// deterministic synthetic ones (random minutiae in a 300 x 400 image) that
// work everywhere, e.g. on a GPU machine without the data.
#ifndef TESSERA_KERNELS_FINGERPRINT_TEST_TEMPLATES_H_
#define TESSERA_KERNELS_FINGERPRINT_TEST_TEMPLATES_H_

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/formats/fvc_data.h"

namespace tessera {
namespace fingerprint {
namespace testing {

inline std::vector<MinutiaPoint> ToPoints(const Template& t) {
  std::vector<MinutiaPoint> out;
  for (const Minutia& m : t.minutiae) {
    out.push_back({static_cast<float>(m.x), static_cast<float>(m.y), static_cast<float>(m.angle)});
  }
  return out;
}

// Real templates of FVC2002 DB `db` (80), or empty when the data is missing.
inline std::vector<std::vector<MinutiaPoint>> RealTemplates(int db, std::vector<int>* fingers = nullptr) {
  std::vector<std::vector<MinutiaPoint>> out;
  auto dir = FindFingerprintDataDir();
  if (!dir.ok()) return out;
  auto imps = LoadFvc2002(*dir, db);
  if (!imps.ok()) return out;
  for (const FvcImpression& imp : *imps) {
    out.push_back(ToPoints(imp.view));
    if (fingers != nullptr) fingers->push_back(imp.finger);
  }
  return out;
}

// `count` random templates of 15..60 minutiae with integer coordinates in a
// 300 x 400 image and angles on the ISO grid (1/256 turn).
inline std::vector<std::vector<MinutiaPoint>> SyntheticTemplates(int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<MinutiaPoint>> out(count);
  for (auto& t : out) {
    const int n = std::uniform_int_distribution<int>(15, 60)(rng);
    for (int i = 0; i < n; ++i) {
      MinutiaPoint m;
      m.x = static_cast<float>(std::uniform_int_distribution<int>(20, 279)(rng));
      m.y = static_cast<float>(std::uniform_int_distribution<int>(20, 379)(rng));
      m.theta = static_cast<float>(std::uniform_int_distribution<int>(0, 255)(rng) * (2 * M_PI / 256));
      t.push_back(m);
    }
  }
  return out;
}

// Real DB `db` if present (reported on stdout), else `fallback` synthetic ones.
inline std::vector<std::vector<MinutiaPoint>> TestTemplates(int db, int fallback, uint32_t seed) {
  auto real = RealTemplates(db);
  if (!real.empty()) {
    std::printf("using the 80 real templates of FVC2002 DB%d_B\n", db);
    return real;
  }
  std::printf("FVC2002 data not found (set TESSERA_FINGERPRINT_DATA); using %d synthetic templates\n", fallback);
  return SyntheticTemplates(fallback, seed);
}

}  // namespace testing
}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_KERNELS_FINGERPRINT_TEST_TEMPLATES_H_
