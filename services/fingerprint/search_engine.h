// The fingerprint search job engine (services/jobs/engine.h): kind
// "fingerprint.search", spec tessera.v1.SearchBatchRequest, result
// tessera.v1.SearchBatchResponse. Runs the request on the searcher of the
// gallery the spec names (`gallery`, "" = "default"; the service's own, through
// FingerprintServiceImpl::searcher_lookup(), so jobs see the same live
// galleries as the RPCs; who may search which gallery was decided when the job
// was submitted, by the auth interceptor, which reads the spec), accepting and rejecting exactly what
// FingerprintService.SearchBatch does (search_request.h). It polls
// ctx.CheckContinue() through the searcher's SearchControl, between gallery
// chunks and inside them, and reports progress per chunk (stage "search",
// templates scored per probe out of the gallery's). A job's result for a
// sharded gallery is merged by MergeShardResponses (shard_merge.h).
//
//   auto engine = std::make_shared<fingerprint::SearchEngine>(service->searcher_lookup(),
//                                                             service->options().search_limits());
//   TESSERA_RETURN_IF_ERROR(engines->Add(engine));
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_ENGINE_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_ENGINE_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "services/fingerprint/search_request.h"
#include "services/fingerprint/search/searcher.h"
#include "services/jobs/engine.h"
#include "services/jobs/typed_engine.h"
#include "tessera/v1/fingerprint.pb.h"

namespace tessera {
namespace fingerprint {

// The request checked once per job (TypedEngine): its probes parsed, and
// the gallery it names (looked up when the job is checked and when it runs:
// galleries come and go).
struct SearchPlan {
  std::string gallery;  // as the spec names it ("" = "default")
  ParsedSearch search;
};

class SearchEngine final : public jobs::TypedEngine<v1::SearchBatchRequest, SearchPlan> {
 public:
  // The searcher of a gallery name; INVALID_ARGUMENT / NOT_FOUND as GallerySet::Get.
  using Lookup = std::function<absl::StatusOr<GallerySearcher*>(absl::string_view gallery)>;
  // The searchers `lookup` returns must outlive the engine.
  SearchEngine(Lookup lookup, SearchLimits limits) : lookup_(std::move(lookup)), limits_(limits) {}
  // One gallery, "default" (`searcher`, not owned, must outlive the engine).
  SearchEngine(GallerySearcher* searcher, SearchLimits limits);

  std::string kind() const override { return "fingerprint.search"; }

 protected:
  // INVALID_ARGUMENT (top_k, matcher, a bad probe), RESOURCE_EXHAUSTED (too
  // many probes, a template too large): ParseSearchBatchRequest.
  absl::StatusOr<SearchPlan> MakePlan(const v1::SearchBatchRequest& request) const override;
  // INVALID_ARGUMENT (a bad gallery name), NOT_FOUND (no such gallery).
  absl::Status CheckPlan(const SearchPlan& plan) const override;
  // CANCELLED / DEADLINE_EXCEEDED when the context says so (within one
  // gallery chunk of work).
  absl::StatusOr<jobs::EngineOutput> RunPlan(const SearchPlan& plan, jobs::EngineContext& ctx) const override;

 private:
  const Lookup lookup_;
  const SearchLimits limits_;
};

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_ENGINE_H_
