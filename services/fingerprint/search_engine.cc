#include "services/fingerprint/search_engine.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/server/gallery_names.h"
#include "tessera/v1/fingerprint.pb.h"

namespace tessera {
namespace fingerprint {

SearchEngine::SearchEngine(GallerySearcher* searcher, SearchLimits limits)
    : lookup_([searcher](absl::string_view gallery) -> absl::StatusOr<GallerySearcher*> {
        const std::string name = GalleryOrDefault(gallery);
        TESSERA_RETURN_IF_ERROR(CheckGalleryName(name));
        if (name != kDefaultGallery) return absl::NotFoundError(absl::StrCat("no gallery '", name, "' on this server"));
        return searcher;
      }),
      limits_(limits) {}

absl::StatusOr<SearchPlan> SearchEngine::MakePlan(const v1::SearchBatchRequest& request) const {
  TESSERA_ASSIGN_OR_RETURN(ParsedSearch parsed, ParseSearchBatchRequest(request, limits_));
  return SearchPlan{request.gallery(), std::move(parsed)};
}

absl::Status SearchEngine::CheckPlan(const SearchPlan& plan) const { return lookup_(plan.gallery).status(); }

absl::StatusOr<jobs::EngineOutput> SearchEngine::RunPlan(const SearchPlan& plan, jobs::EngineContext& ctx) const {
  const auto start = std::chrono::steady_clock::now();
  TESSERA_RETURN_IF_ERROR(ctx.CheckContinue());
  TESSERA_ASSIGN_OR_RETURN(GallerySearcher* searcher, lookup_(plan.gallery));
  const ParsedSearch& parsed = plan.search;
  SearchControl control;
  control.check = [&ctx] { return ctx.CheckContinue(); };
  control.progress = [&ctx](int64_t done, int64_t total) {
    jobs::JobProgress progress;
    progress.stage = "search";
    progress.step = done;
    progress.total_steps = total;
    progress.fraction = total > 0 ? static_cast<double>(done) / total : 1.0;
    ctx.Report(progress);
  };
  SearchOptions options;
  options.top_k = parsed.top_k;
  options.matcher = parsed.matcher;
  options.filter = parsed.filter;
  options.control = &control;
  SearchStats stats;
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::vector<SearchCandidate>> results,
                           searcher->Search(parsed.probes, options, &stats));
  v1::SearchBatchResponse response;
  for (const auto& probe : results) AddCandidates(probe, response.add_results()->mutable_candidates());
  SetTiming(stats, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(),
            response.mutable_timing());
  response.mutable_timing()->set_batch_size(static_cast<int32_t>(parsed.probes.size()));
  jobs::EngineOutput out;
  out.result.PackFrom(response);
  return out;
}

}  // namespace fingerprint
}  // namespace tessera
