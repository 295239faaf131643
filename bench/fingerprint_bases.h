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

// The synthetic gallery the throughput benches search: `size` templates, of
// which 4 perturbed impressions of each of the `bases` base templates are the
// mates (at most `size`).
SyntheticGalleryOptions BenchGalleryOptions(int64_t size, uint64_t seed, size_t bases);

}  // namespace tessera::fingerprint

#endif  // TESSERA_BENCH_FINGERPRINT_BASES_H_
