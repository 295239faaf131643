// Ten-print search: every finger of a card searched against the gallery's
// templates of the same finger position, the per-finger scores fused per
// subject (TemplateMetadata::subject_id).
//
// Fusion rules (TenPrintFusion):
//   kSum: a subject's score is the sum, over the card's fingers, of its best
//         template score at that finger's position (0 where the subject is
//         not among that finger's candidates). Independent fingers add up
//         evidence the way a sum of log-likelihood ratios does; an impostor
//         rarely scores high on several fingers at once.
//   kMax: the best single finger.
// Measured on FVC2002 "cards" (bench/results/2026-12-06-cpu-tenprint-fvc-cards.md:
// 4 fingers, one per database, 560 probe cards, up to 10^4 background
// subjects): both rules reach rank-1 100 % with four fingers (the best single
// finger 96.2-99.8 %); with a threshold (TPIR at FPIR 1 %) and on 2- and
// 3-finger subsets sum is never worse and up to 4.3 points better, so kSum is
// the default.
//
// Candidates without a subject are not subjects and are left out. A card
// finger searches the templates of the same finger: its position, and for
// thumbs the rolled and plain codes alike (1 and 11, 6 and 12:
// SameFingerPositions). A card finger of unknown position (FGP 0) searches
// every template; a gallery template of unknown position is found only by
// such fingers.
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_TENPRINT_SEARCH_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_TENPRINT_SEARCH_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/store/template_metadata.h"

namespace tessera {
namespace fingerprint {

enum class TenPrintFusion { kSum, kMax };

// "sum" or "max"; "" is the default (kSum). INVALID_ARGUMENT otherwise.
absl::StatusOr<TenPrintFusion> ParseTenPrintFusion(absl::string_view name);
const char* TenPrintFusionName(TenPrintFusion fusion);

struct CardFinger {
  int finger_position = 0;  // FGP; 0 unknown
  std::vector<MinutiaPoint> minutiae;
};

struct FingerMatch {
  int finger_position = 0;  // of the card finger
  std::string id;           // the subject's best template at that position
  float score = 0;
};

struct SubjectMatch {
  std::string subject_id;
  float score = 0;                   // fused
  std::vector<FingerMatch> fingers;  // card fingers that found the subject, in card order
};

struct TenPrintOptions {
  int top_k = 10;  // subjects returned
  // Candidates kept per card finger before fusing (0: max(100, 10 * top_k));
  // a mate needs to be among them on a finger for that finger to count.
  int per_finger_candidates = 0;
  TenPrintFusion fusion = TenPrintFusion::kSum;
};

// The finger position codes that name the same finger as `fgp` (itself; 1
// and 11 the right thumb, rolled and plain; 6 and 12 the left thumb).
std::vector<int> SameFingerPositions(int fgp);

// One finger's search: `probe` against the templates `filter` accepts, the
// `top_k` best (with their metadata). The service runs it on its searcher
// (GallerySearcher::Search), a shard router across its shards.
using FingerSearchFn = std::function<absl::StatusOr<std::vector<SearchCandidate>>(
    const std::vector<MinutiaPoint>& probe, const TemplateFilter& filter, int top_k)>;

// All of a card's fingers in one search: probes[i] against the templates
// filters[i] accepts, the `top_k` best of each (GallerySearcher::Search with
// SearchOptions::probe_filters: one pass over the gallery, batched on the
// GPU's pipeline).
using CardSearchFn = std::function<absl::StatusOr<std::vector<std::vector<SearchCandidate>>>(
    const std::vector<std::vector<MinutiaPoint>>& probes, const std::vector<TemplateFilter>& filters, int top_k)>;

// The subjects best first (ties: subject id). INVALID_ARGUMENT for an empty
// card, top_k < 1 or per_finger_candidates < 0; a search error is returned
// as is (annotated with the finger for FingerSearchFn).
absl::StatusOr<std::vector<SubjectMatch>> TenPrintSearchBatched(const std::vector<CardFinger>& card,
                                                                const TenPrintOptions& options,
                                                                const CardSearchFn& search);
// The same, one finger at a time (e.g. a shard router's fan-out per finger).
absl::StatusOr<std::vector<SubjectMatch>> TenPrintSearch(const std::vector<CardFinger>& card,
                                                         const TenPrintOptions& options, const FingerSearchFn& search);

// The fusion step alone: per card finger (positions[i]) its candidates.
std::vector<SubjectMatch> FuseBySubject(const std::vector<int>& positions,
                                        const std::vector<std::vector<SearchCandidate>>& per_finger,
                                        TenPrintFusion fusion, int top_k);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_TENPRINT_SEARCH_H_
