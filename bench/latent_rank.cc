#include "bench/latent_rank.h"

#include <cmath>

namespace tessera::fingerprint {

MateRank RankOfMate(const std::vector<SearchCandidate>& scored, const std::function<bool(const std::string&)>& is_mate,
                    const std::function<bool(const std::string&)>& in_subset) {
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  const auto sane = [](float s) { return std::isnan(s) ? kLowest : s; };
  MateRank r;
  float best_mate = kLowest;
  bool any_nonmate = false;
  for (const SearchCandidate& c : scored) {
    if (in_subset && !in_subset(c.id)) continue;
    ++r.candidates;
    const float s = sane(c.score);
    if (is_mate(c.id)) {
      if (!r.found || s > best_mate) best_mate = s, r.mate_score = c.score;
      r.found = true;
      ++r.mates;
    } else if (!any_nonmate || s > sane(r.best_nonmate)) {
      any_nonmate = true;
      r.best_nonmate = c.score;
      r.best_nonmate_id = c.id;
    }
  }
  if (!r.found) {
    r.rank = r.candidates + 1;
    return r;
  }
  int64_t above = 0;
  for (const SearchCandidate& c : scored) {
    if ((in_subset && !in_subset(c.id)) || is_mate(c.id)) continue;
    const float s = sane(c.score);
    above += s >= best_mate;
    r.ties += s == best_mate;
  }
  r.rank = 1 + above;
  return r;
}

}  // namespace tessera::fingerprint
