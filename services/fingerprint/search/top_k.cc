#include "services/fingerprint/search/top_k.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera {
namespace fingerprint {

float SanitizeScore(float s) { return std::isnan(s) ? -std::numeric_limits<float>::infinity() : s; }

std::vector<Candidate> TopK(const float* scores, int n, int k, int index_offset) {
  std::vector<Candidate> all(std::max(0, n));
  for (int i = 0; i < n; ++i) all[i] = {index_offset + i, SanitizeScore(scores[i])};
  const int keep = std::max(0, std::min(k, n));
  std::partial_sort(all.begin(), all.begin() + keep, all.end(), CandidateBefore);
  all.resize(keep);
  return all;
}

void MergeTopK(const float* scores, int n, int first, int k, std::vector<Candidate>* top, const uint8_t* exclude) {
  if (k < 1) return;
  std::vector<Candidate> fresh;
  for (int i = 0; i < n; ++i) {
    if (exclude != nullptr && exclude[first + i] != 0) continue;
    const Candidate c{first + i, SanitizeScore(scores[i])};
    if (static_cast<int>(top->size()) >= k && !CandidateBefore(c, top->back())) continue;
    fresh.push_back(c);
  }
  if (fresh.empty()) return;
  top->insert(top->end(), fresh.begin(), fresh.end());
  const int keep = std::min<int>(k, top->size());
  std::partial_sort(top->begin(), top->begin() + keep, top->end(), CandidateBefore);
  top->resize(keep);
}

}  // namespace fingerprint
}  // namespace tessera
