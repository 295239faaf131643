// 1:N search over the in-memory gallery, behind a small interface so that
// matchers can be swapped ("matcher": lssr or dmc; a searcher may score with
// several, chosen per request). A searcher mirrors the live templates of a GalleryStore
// (the store is the durable truth; the searcher is rebuilt from it at start).
//
// MccSearcher: MCC bit cylinders in one MccGallery (structure of arrays),
// appended to as templates arrive; deleted templates are marked and skipped,
// and the arrays are rebuilt without them once they are a quarter of the
// gallery (or on Compact). A readers-writer lock lets searches run together
// and wait only for the short append/mark step of an enroll or delete (the
// descriptors of new templates are built before the lock, on all cores).
// Scores, over the same arrays:
//   "lssr": LSS-R (kernels/fingerprint/lss.h) on all CPU cores, or with a GPU
//     present (device "auto"/"cuda") through the ALFI dual-stream pipeline
//     (alfi_pipeline.h, gallery resident on the GPU when it fits, else
//     streamed from pinned memory), rebuilt when enough templates have been
//     appended since it was built; templates appended after it are scored
//     on the CPU, so results never lag;
//   "dmc": deformable minutiae clustering (dmc_matcher.h: kernels 2-4 on the
//     CPU or the GPU stream, CPU final stage on all cores);
//   "fusion": LSS-R (CPU) and DMC of every template, fused
//     (fusion_score.h: w * sqrt(DMC) + (1 - w) * LSS-R);
//   "cascade": LSS-R over the whole gallery exactly as "lssr" (GPU pipeline
//     or CPU), then DMC of each probe's shortlist of cascade_candidates
//     (at least top_k) best LSS-R candidates, ranked by the fused score. The
//     re-scoring takes the shortlists of all probes of the call together:
//     with a GPU, DMC's kernels per probe's shortlist on the GPU stream, then
//     the final stage of every (probe, candidate) pair in one loop on all CPU
//     cores; without one, kernels and final stage per pair in one loop on all
//     cores, straight from the gallery's arrays. DMC scores as "dmc" gives
//     them. The returned
//     scores are fused scores; 1:1 (VerifyId, Compare) a cascade is its fusion.
// A call with many probes is one batch: on the CPU the gallery is scored
// chunk by chunk against every probe (each template's cylinders are read
// once per chunk for all probes), on the GPU every uploaded pipeline batch
// is scored for all probes. Each call may bring a SearchControl
// (search_control.h): it is polled between chunks, probes and pipeline
// batches and inside the parallel loops, so an abandoned call stops within
// milliseconds of work.
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_SEARCHER_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_SEARCHER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/fingerprint/mcc.h"
#include "services/fingerprint/search/fusion_score.h"
#include "services/fingerprint/store/gallery_store.h"
#include "services/fingerprint/search/search_control.h"

namespace tessera {
namespace fingerprint {

struct SearchCandidate {
  std::string id;
  float score = 0;
  // Whose finger the candidate is (as enrolled); null when it has none.
  std::shared_ptr<const TemplateMetadata> metadata;
};

struct SearchStats {
  int64_t gallery_templates = 0;  // live templates searched
  double prepare_seconds = 0;     // probe descriptors
  double score_seconds = 0;       // scoring + top-k, all probes
  std::string backend;            // "cpu" or "cuda"
  std::string matcher;            // "lssr", "dmc", "fusion" or "cascade"
  int64_t chunks = 0;             // gallery chunks scored on the CPU plus pipeline runs on the GPU
};

struct SearchOptions {
  int top_k = 10;       // >= 1
  std::string matcher;  // empty for the default, else one of matchers()
  // "cascade": the LSS-R shortlist re-scored per probe (max of this and
  // top_k); 0: the searcher's SearcherOptions::cascade_candidates.
  int cascade_candidates = 0;
  // Cancellation, per-probe interest and progress (search_control.h); not
  // owned, may be null (the search runs to the end).
  const SearchControl* control = nullptr;
  // Only templates whose finger position / impression type it accepts are
  // candidates (empty: all); the top-k is exact within them.
  TemplateFilter filter;
  // Per probe (empty, or one per probe, replacing `filter`): each probe's
  // own filter, all probes still scored in one pass over the gallery (a
  // ten-print card's fingers, each against its own finger position).
  std::vector<TemplateFilter> probe_filters;
};

class GallerySearcher {
 public:
  virtual ~GallerySearcher() = default;
  virtual std::string matcher() const = 0;  // the default, one of matchers()
  virtual std::vector<std::string> matchers() const = 0;  // all it can score with

  // Adds templates; an id already present is replaced. Visible to searches
  // once it returns. INVALID_ARGUMENT for minutiae the matcher rejects
  // (nothing is added then).
  virtual absl::Status Add(const std::vector<std::shared_ptr<const StoredTemplate>>& templates) = 0;
  // Adds one template whose MCC cylinders were persisted; matchers that do
  // not use them build their own.
  virtual absl::Status AddWithCylinders(const std::shared_ptr<const StoredTemplate>& t, MccTemplate&& cylinders) {
    (void)cylinders;
    return Add({t});
  }
  // Capacity hint before adding many templates.
  virtual void Reserve(int64_t templates, int64_t cylinders) {
    (void)templates;
    (void)cylinders;
  }
  // False when absent.
  virtual bool Remove(absl::string_view id) = 0;
  virtual int64_t size() const = 0;
  // (id, seq) of every template held, in no particular order.
  virtual std::vector<std::pair<std::string, uint64_t>> Entries() const = 0;

  // The top_k (>= 1) best gallery templates of each probe, best first (ties:
  // earlier enrolled first, top_k.h), results in the order of `probes`; all
  // probes see the same gallery. An empty gallery gives empty lists.
  // INVALID_ARGUMENT for an unknown matcher, top_k < 1, cascade_candidates
  // out of range or a bad probe;
  // the control's status (CANCELLED, DEADLINE_EXCEEDED) when it stopped the
  // search.
  virtual absl::StatusOr<std::vector<std::vector<SearchCandidate>>> Search(
      const std::vector<std::vector<MinutiaPoint>>& probes, const SearchOptions& options,
      SearchStats* stats = nullptr) = 0;
  // The same without a control. `matcher`: empty for the default.
  absl::StatusOr<std::vector<std::vector<SearchCandidate>>> Search(const std::vector<std::vector<MinutiaPoint>>& probes,
                                                                   int top_k, SearchStats* stats = nullptr,
                                                                   absl::string_view matcher = "") {
    SearchOptions options;
    options.top_k = top_k;
    options.matcher = std::string(matcher);
    return Search(probes, options, stats);
  }
  // 1:1 score of a probe against an enrolled id (NOT_FOUND) or two templates.
  virtual absl::StatusOr<float> VerifyId(const std::vector<MinutiaPoint>& probe, absl::string_view id,
                                         absl::string_view matcher = "") = 0;
  virtual absl::StatusOr<float> Compare(const std::vector<MinutiaPoint>& a, const std::vector<MinutiaPoint>& b,
                                        absl::string_view matcher = "") = 0;

  // For snapshots: the persisted form of template `t` (same seq), if any.
  virtual bool ExportCylinders(const StoredTemplate& t, MccTemplate* out) const {
    (void)t;
    (void)out;
    return false;
  }
  // Drops what deletions left behind.
  virtual void Compact() {}
};

struct SearcherOptions {
  std::string matcher = "lssr";  // the default scorer, one of SearcherMatchers()
  std::string device = "auto";  // "auto", "cpu" or "cuda" (scoring backend)
  // Templates per CPU chunk (between two polls of a SearchControl); 0:
  // automatic (LSS-R: ~2 M scores per chunk over all probes; DMC: its
  // kernel batch; cascade on the GPU: DMC's kernel batch per shortlist
  // piece, re-scored in rounds of up to 16384 templates, else three chunks).
  // Tests use small ones.
  int chunk_templates = 0;
  double fusion_weight = kDefaultFusionWeight;          // "fusion", "cascade": in [0, 1]
  int cascade_candidates = kDefaultCascadeCandidates;  // "cascade": 1..kMaxCascadeCandidates
};

// INVALID_ARGUMENT for an unknown matcher (listing the known ones), a
// fusion_weight or cascade_candidates out of range (naming the field);
// FAILED_PRECONDITION for device "cuda" without a GPU.
absl::StatusOr<std::unique_ptr<GallerySearcher>> CreateSearcher(const SearcherOptions& options);
// The matcher names CreateSearcher accepts.
std::vector<std::string> SearcherMatchers();

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_SEARCHER_H_
