// The base templates the fingerprint benchmarks build galleries and latents
// from: every impression of FVC2002 DB1-DB4 (identity db * 1000 + finger),
// or, without the data, 320 random 35-minutia templates (8 per identity)
// drawn with SplitMix64(seed).
#ifndef TESSERA_BENCH_FINGERPRINT_BASES_H_
#define TESSERA_BENCH_FINGERPRINT_BASES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "services/fingerprint/eval/synthetic_gallery.h"

namespace tessera::fingerprint {

// `data_dir` empty: FindFingerprintDataDir(). Prints a line when it falls
// back to random templates.
std::vector<BaseTemplate> LoadBenchBases(const std::string& data_dir, uint64_t seed);

}  // namespace tessera::fingerprint

#endif  // TESSERA_BENCH_FINGERPRINT_BASES_H_
