#include "bench/searcher_fill.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/parallel.h"

namespace tessera::fingerprint {

bool AppendToSearcher(const MccGallery& g, int64_t from, int64_t to, GallerySearcher* searcher, int64_t first_id,
                      bool reserve, const TemplateAnnotator& annotate) {
  if (reserve) searcher->Reserve(to - from, g.start[to] - g.start[from]);
  constexpr int64_t kStep = 65536;  // one step's cylinders at a time besides the searcher's
  std::vector<MccTemplate> block;
  for (int64_t b = from; b < to; b += kStep) {
    const int64_t e = std::min(to, b + kStep);
    block.assign(e - b, MccTemplate());
    ParallelFor(e - b, [&](int64_t lo, int64_t hi, int) {
      for (int64_t i = lo; i < hi; ++i) block[i] = g.Get(static_cast<int>(b + i));
    });
    for (int64_t i = 0; i < e - b; ++i) {
      auto t = std::make_shared<StoredTemplate>();
      t->id = absl::StrCat(first_id + b + i);
      t->seq = static_cast<uint64_t>(first_id + b + i + 1);
      if (annotate) annotate(first_id + b + i, t.get());
      if (absl::Status s = searcher->AddWithCylinders(t, std::move(block[i])); !s.ok()) {
        std::fprintf(stderr, "searcher: %s\n", std::string(s.message()).c_str());
        return false;
      }
    }
  }
  return true;
}

}  // namespace tessera::fingerprint
