// The rank of a latent's mate in a search's scored candidate list, as the
// FVC identification protocol counts it (services/fingerprint/eval/eval.h):
// 1 + the number of non-mates scoring at least as high as the best mate, so
// ties count against the mate (the searcher itself orders ties by
// enrolment, top_k.h, which would favour whichever was enrolled first).
// Used by bench/fingerprint_latent_rank_bench.cc.
#ifndef TESSERA_BENCH_LATENT_RANK_H_
#define TESSERA_BENCH_LATENT_RANK_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "services/fingerprint/search/searcher.h"

namespace tessera::fingerprint {

struct MateRank {
  // A mate is among the candidates considered.
  bool found = false;
  // found: 1 + non-mates with score >= the best mate's (NaN scores rank
  // last, as top_k.h's SanitizeScore makes them). Not found: candidates + 1,
  // a lower bound (the list was cut before the mate).
  int64_t rank = 0;
  // Non-mates with exactly the best mate's score (included in rank).
  int64_t ties = 0;
  int64_t candidates = 0;  // entries considered: mates and non-mates in the subset
  int64_t mates = 0;       // mates among them
  float mate_score = std::numeric_limits<float>::quiet_NaN();
  // The best non-mate (-infinity and empty when there is none).
  float best_nonmate = -std::numeric_limits<float>::infinity();
  std::string best_nonmate_id;
};

// `scored`: candidates of one probe, in any order. `is_mate(id)` tells the
// mates; `in_subset(id)` (null: every candidate) restricts the ranking to a
// part of the gallery, e.g. its real templates only, mates included or not
// as the predicate says.
MateRank RankOfMate(const std::vector<SearchCandidate>& scored, const std::function<bool(const std::string&)>& is_mate,
                    const std::function<bool(const std::string&)>& in_subset = nullptr);

}  // namespace tessera::fingerprint

#endif  // TESSERA_BENCH_LATENT_RANK_H_
