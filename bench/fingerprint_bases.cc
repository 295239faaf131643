#include "bench/fingerprint_bases.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "services/fingerprint/eval/eval.h"
#include "services/fingerprint/formats/fvc_data.h"

namespace tessera::fingerprint {

std::vector<BaseTemplate> LoadBenchBases(const std::string& data_dir, uint64_t seed) {
  std::vector<BaseTemplate> bases;
  std::string dir = data_dir;
  if (dir.empty()) {
    auto found = FindFingerprintDataDir();
    if (found.ok()) dir = *found;
  }
  for (int db = 1; db <= 4 && !dir.empty(); ++db) {
    auto imps = LoadFvc2002(dir, db);
    if (!imps.ok()) break;
    for (const FvcImpression& imp : *imps) bases.push_back({ToMinutiaPoints(imp.view), db * 1000 + imp.finger});
  }
  if (bases.empty()) {
    std::printf("FVC2002 data not found: synthetic base templates\n");
    SplitMix64 rng(seed);
    for (int i = 0; i < 320; ++i) {
      BaseTemplate b;
      for (int k = 0; k < 35; ++k) {
        b.points.push_back({static_cast<float>(rng.UniformInt(20, 279)), static_cast<float>(rng.UniformInt(20, 379)),
                            static_cast<float>(rng.UniformInt(0, 255) * (2 * M_PI / 256))});
      }
      b.identity = i / 8;
      bases.push_back(std::move(b));
    }
  }
  return bases;
}

SyntheticGalleryOptions BenchGalleryOptions(int64_t size, uint64_t seed, size_t bases) {
  SyntheticGalleryOptions o;
  o.seed = seed;
  o.size = size;
  o.mated_templates = std::min<int64_t>(size, 4 * static_cast<int64_t>(bases));
  return o;
}

}  // namespace tessera::fingerprint
