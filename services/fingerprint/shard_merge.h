// Gallery shards: a gallery split over several workers, each searching its
// own part; the global top-k is merged from each shard's top-k (the global
// top-k is always inside the union of the shards' top-k lists).
//
// Ties: the searcher ranks by score, then by enrolment order (top_k.h). A
// merge knows each candidate's shard and its rank within that shard, so it
// orders equal scores by shard, then by the shard's own order. That is
// exactly one gallery's order when the shards hold consecutive ranges of the
// enrolment order (shard 0 the earliest templates, then shard 1, ...): then
// the merge equals searching the whole gallery, ties included. (With another
// split the same scores come back, equal scores possibly in another order.)
// An id returned by several shards (a template being moved between them)
// counts once, at its best place.
#ifndef TESSERA_SERVICES_FINGERPRINT_SHARD_MERGE_H_
#define TESSERA_SERVICES_FINGERPRINT_SHARD_MERGE_H_

#include <vector>

#include "absl/status/statusor.h"
#include "services/fingerprint/search/searcher.h"
#include "tessera/v1/fingerprint.pb.h"

namespace tessera {
namespace fingerprint {

// One probe: shards[s] is shard s's list (best first, as a searcher returns
// it). The best top_k of all, best first.
std::vector<SearchCandidate> MergeShardTopK(const std::vector<std::vector<SearchCandidate>>& shards, int top_k);

// Many probes: shard_results[s][p] is shard s's list for probe p.
// INVALID_ARGUMENT when the shards disagree on the number of probes or
// top_k < 1.
absl::StatusOr<std::vector<std::vector<SearchCandidate>>> MergeShardResults(
    const std::vector<std::vector<std::vector<SearchCandidate>>>& shard_results, int top_k);

// The same over SearchBatch responses (what "fingerprint.search" jobs
// return), in shard order. Candidates are copied whole: each keeps its
// metadata and explanation (a shard explains its own candidates). Timing: gallery sizes and queue times add up,
// prepare/score/total are the slowest shard's (they ran in parallel),
// backend and matcher are the first shard's.
absl::StatusOr<v1::SearchBatchResponse> MergeShardResponses(const std::vector<v1::SearchBatchResponse>& shards,
                                                             int top_k);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SHARD_MERGE_H_
