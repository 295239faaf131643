// Filling a service searcher with a synthetic gallery's descriptors, as a
// snapshot reload does (no descriptor rebuilt): what the 1:N throughput
// benches search.
#ifndef TESSERA_BENCH_SEARCHER_FILL_H_
#define TESSERA_BENCH_SEARCHER_FILL_H_

#include <cstdint>
#include <functional>

#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/search/searcher.h"

namespace tessera::fingerprint {

// Appends templates [from, to) of `g` to `searcher` with their cylinders;
// template i gets id first_id + i and seq first_id + i + 1. `reserve`: hint
// the searcher's capacity for them first (callers filling block by block
// reserve once themselves). Prints the searcher's error and returns false
// when one is refused. `annotate` (may be null) fills in template id's
// metadata (subject, finger position) before it is appended.
using TemplateAnnotator = std::function<void(int64_t id, StoredTemplate* t)>;
bool AppendToSearcher(const MccGallery& g, int64_t from, int64_t to, GallerySearcher* searcher, int64_t first_id = 0,
                      bool reserve = true, const TemplateAnnotator& annotate = nullptr);

}  // namespace tessera::fingerprint

#endif  // TESSERA_BENCH_SEARCHER_FILL_H_
