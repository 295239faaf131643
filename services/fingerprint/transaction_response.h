// EnrollTransaction and SearchTransaction pieces shared by the two front
// ends that answer them: the single server (fingerprint_service_subjects.cc)
// and the shard router (shard_router.cc). Both read the card with the same
// checks, decide the search mode the same way and build the same answers,
// so a card gives one answer whether one server or N shards hold the gallery.
#ifndef TESSERA_SERVICES_FINGERPRINT_TRANSACTION_RESPONSE_H_
#define TESSERA_SERVICES_FINGERPRINT_TRANSACTION_RESPONSE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/extract/transaction_templates.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/search/tenprint_search.h"
#include "services/fingerprint/search_request.h"
#include "tessera/v1/fingerprint.pb.h"

namespace tessera {
namespace fingerprint {

// A request's transaction read (ReadTransactionCard): INVALID_ARGUMENT when
// empty or malformed, RESOURCE_EXHAUSTED beyond 4 images' worth of bytes
// (limits.max_image_bytes each: a card holds up to 14 images), the images'
// input (ppi, quality gate: 0 takes limits.min_quality) checked as
// ImageInputFromProto checks an image's.
absl::StatusOr<TransactionCard> ReadRequestCard(const std::string& bytes, double ppi, int min_quality,
                                                const ImageLimits& limits);

// EnrollTransaction's answer but its gallery_size: subject, TCN, one result
// per card finger (its template id ids[i]; its status: the card's reason it
// has no template, else stored[j] of the plan item j with finger_of_item[j]
// == i) and the enrolled/failed counts.
void SetEnrollTransactionResponse(const TransactionCard& card, absl::string_view subject_id,
                                  const std::vector<std::string>& ids, const std::vector<size_t>& finger_of_item,
                                  const std::vector<absl::Status>& stored, v1::EnrollTransactionResponse* response);

// The fingers of a card that can be searched. `latent`: searched each on its
// own (IsLatentSubmission), else as a ten-print card.
struct TransactionProbes {
  std::vector<int> searched;                       // card finger indices
  std::vector<std::vector<MinutiaPoint>> minutiae;  // their probes, in the same order
  bool latent = false;
};

// Parses each finger's template (a finger whose record does not parse gets
// that status) and decides the mode: what the service, the router and
// `tessera fp search` search. No finger searchable: `minutiae` is empty.
TransactionProbes SearchableProbes(TransactionCard& card);

// SearchableProbes, then adds the TCN and one TransactionProbe per card finger to
// `response` (without candidates) and decides the mode (`response->mode`
// too). INVALID_ARGUMENT when no finger can be searched.
absl::StatusOr<TransactionProbes> PrepareTransactionSearch(TransactionCard& card,
                                                           v1::SearchTransactionResponse* response);

// INVALID_ARGUMENT naming "fusion" for a value outside the enum.
absl::StatusOr<TenPrintFusion> TenPrintFusionFromProto(v1::TenPrintFusion fusion);

// A ten-print search's subjects as the answer's `subjects`.
void AddSubjectCandidates(const std::vector<SubjectMatch>& subjects, v1::SearchTransactionResponse* response);

// A candidate as the API returns it, back as a searcher's (with its metadata,
// unchecked: it is what a gallery stored): what a ten-print search over
// shards fuses.
SearchCandidate CandidateFromProto(const v1::Candidate& candidate);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_TRANSACTION_RESPONSE_H_
