// The fingerprint search job engine (services/jobs/engine.h): kind
// "fingerprint.search", spec tessera.v1.SearchBatchRequest, result
// tessera.v1.SearchBatchResponse. Runs the request on a given searcher (the
// service's own, FingerprintGallery::searcher(), so jobs see the same live
// gallery as the RPCs), accepting and rejecting exactly what
// FingerprintService.SearchBatch does (search_request.h). It polls
// ctx.CheckContinue() through the searcher's SearchControl, between gallery
// chunks and inside them, and reports progress per chunk (stage "search",
// templates scored per probe out of the gallery's). A job's result for a
// sharded gallery is merged by MergeShardResponses (shard_merge.h).
//
//   auto engine = std::make_shared<fingerprint::SearchEngine>(&service->gallery().searcher(),
//                                                             service->options().search_limits());
//   TESSERA_RETURN_IF_ERROR(engines->Add(engine));
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_ENGINE_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_ENGINE_H_

#include <string>

#include "absl/status/statusor.h"
#include "services/fingerprint/search_request.h"
#include "services/fingerprint/searcher.h"
#include "services/jobs/engine.h"

namespace tessera {
namespace fingerprint {

class SearchEngine final : public jobs::Engine {
 public:
  // `searcher` (not owned) must outlive the engine.
  SearchEngine(GallerySearcher* searcher, SearchLimits limits) : searcher_(searcher), limits_(limits) {}

  std::string kind() const override { return "fingerprint.search"; }
  std::string spec_type() const override { return "tessera.v1.SearchBatchRequest"; }
  // INVALID_ARGUMENT (another message type, top_k, matcher, a bad probe),
  // RESOURCE_EXHAUSTED (too many probes, a template too large).
  absl::Status Validate(const google::protobuf::Any& spec) const override;
  // CANCELLED / DEADLINE_EXCEEDED when the context says so (within one
  // gallery chunk of work).
  absl::StatusOr<jobs::EngineOutput> Run(const google::protobuf::Any& spec, jobs::EngineContext& ctx) const override;

 private:
  absl::StatusOr<ParsedSearch> Parse(const google::protobuf::Any& spec) const;

  GallerySearcher* const searcher_;
  const SearchLimits limits_;
};

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_ENGINE_H_
