#include "bench/fingerprint_gallery_prebuild.h"

#include <algorithm>
#include <memory>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "bench/bench_util.h"
#include "common/parallel.h"
#include "common/status.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/search_request.h"
#include "services/fingerprint/store/gallery_store.h"

namespace tessera::fingerprint {

absl::Status WritePrebuiltGallery(const std::string& dir, int64_t count,
                                  const std::function<std::string(int64_t)>& id_of,
                                  const std::function<std::string(int64_t)>& record_of, TemplateFormat format,
                                  const Stream& stream, PrebuiltGalleryStats* stats) {
  PrebuiltGalleryStats local;
  PrebuiltGalleryStats& st = stats != nullptr ? *stats : local;
  st = PrebuiltGalleryStats{};
  TESSERA_ASSIGN_OR_RETURN(std::unique_ptr<GalleryStore> store, GalleryStore::Open(dir));
  if (store->size() != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("prebuilt gallery: ", dir, " already holds ", store->size(), " templates"));
  }
  // Cylinders by template index, and the index of each id (Compact asks by
  // template).
  std::vector<MccTemplate> cylinders(count);
  std::unordered_map<std::string, int64_t> index_of;
  index_of.reserve(static_cast<size_t>(count));
  constexpr int64_t kGroup = 65536;  // templates per parse / build / commit
  for (int64_t begin = 0; begin < count; begin += kGroup) {
    const int64_t end = std::min(count, begin + kGroup);
    const auto t0 = bench::Clock::now();
    std::vector<StoredTemplate> batch(end - begin);
    std::vector<absl::Status> status(end - begin);
    ParallelFor(end - begin, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) {
        StoredTemplate& t = batch[i];
        t.id = id_of(begin + i);
        t.bytes = record_of(begin + i);
        absl::StatusOr<ParsedTemplate> parsed = ParseProbeOrTemplate(t.bytes, format);
        if (!parsed.ok()) {
          status[i] = parsed.status();
          continue;
        }
        t.format = parsed->format;
        t.minutiae = std::move(parsed->minutiae);
      }
    });
    for (int64_t i = 0; i < end - begin; ++i) {
      if (!status[i].ok()) return absl::InvalidArgumentError(absl::StrCat("record ", begin + i, ": ", status[i].message()));
    }
    const auto t1 = bench::Clock::now();
    std::vector<std::vector<MinutiaPoint>> points(end - begin);
    for (int64_t i = 0; i < end - begin; ++i) points[i] = batch[i].minutiae;
    if (stream.backend() == Backend::kCuda) {
      TESSERA_ASSIGN_OR_RETURN(std::vector<MccTemplate> built, BuildMccTemplates(stream, points));
      std::move(built.begin(), built.end(), cylinders.begin() + begin);
    } else {
      ParallelForDynamic(end - begin, 64, [&](int64_t b, int64_t e, int) {
        for (int64_t i = b; i < e; ++i) cylinders[begin + i] = cpu::BuildMccTemplate(points[i]);
      });
    }
    const auto t2 = bench::Clock::now();
    for (int64_t i = 0; i < end - begin; ++i) index_of.emplace(batch[i].id, begin + i);
    TESSERA_ASSIGN_OR_RETURN(auto results, store->EnrollBatch(std::move(batch)));
    for (size_t i = 0; i < results.size(); ++i) {
      if (!results[i].ok()) {
        return absl::Status(results[i].status().code(),
                            absl::StrCat("enroll ", begin + static_cast<int64_t>(i), ": ", results[i].status().message()));
      }
    }
    st.parse_seconds += bench::Seconds(t0, t1);
    st.cylinder_seconds += bench::Seconds(t1, t2);
    st.store_seconds += bench::SecondsSince(t2);
  }
  const auto tc = bench::Clock::now();
  TESSERA_RETURN_IF_ERROR(store->Compact([&](const StoredTemplate& t, MccTemplate* out) {
    auto it = index_of.find(t.id);
    if (it == index_of.end()) return false;
    *out = cylinders[it->second];
    return true;
  }));
  st.compact_seconds = bench::SecondsSince(tc);
  st.templates = count;
  return absl::OkStatus();
}

}  // namespace tessera::fingerprint
