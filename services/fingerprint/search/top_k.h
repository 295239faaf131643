// Top-k selection for gallery searches. Candidates are ordered best first:
// higher score first, ties by lower template index (the gallery's enrolment
// order: "earlier enrolled first"); a NaN score ranks last. This total order
// makes the top-k unique, so any way of cutting the gallery into chunks and
// merging gives the same list as scoring it at once.
#ifndef TESSERA_SERVICES_FINGERPRINT_SEARCH_TOP_K_H_
#define TESSERA_SERVICES_FINGERPRINT_SEARCH_TOP_K_H_

#include <cstdint>
#include <vector>

namespace tessera {
namespace fingerprint {

struct Candidate {
  int template_index = 0;
  float score = 0;
  bool operator==(const Candidate& o) const { return template_index == o.template_index && score == o.score; }
};

// Orders candidates best first: higher score, then lower template index.
inline bool CandidateBefore(const Candidate& a, const Candidate& b) {
  return a.score > b.score || (a.score == b.score && a.template_index < b.template_index);
}

// NaN becomes -infinity (ranks last; keeps the ordering strict and weak).
float SanitizeScore(float s);

// The k best of scores[0 .. n) (index_offset added to the indices), best
// first: the brute-force reference of a search.
std::vector<Candidate> TopK(const float* scores, int n, int k, int index_offset = 0);

// Merges scores[0 .. n) of templates first .. first + n - 1 into `top`
// (sorted best first, at most k entries). Templates t with exclude[t] != 0
// (indexed by template; null: none excluded) are never candidates.
void MergeTopK(const float* scores, int n, int first, int k, std::vector<Candidate>* top,
               const uint8_t* exclude = nullptr);

}  // namespace fingerprint
}  // namespace tessera

#endif  // TESSERA_SERVICES_FINGERPRINT_SEARCH_TOP_K_H_
