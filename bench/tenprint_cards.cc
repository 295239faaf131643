#include "bench/tenprint_cards.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tessera::fingerprint {

std::vector<std::pair<int, int>> CardPairs(int impressions) {
  std::vector<std::pair<int, int>> out;
  for (int g = 1; g <= impressions; ++g) {
    for (int p = 1; p <= impressions; ++p) {
      if (p != g) out.emplace_back(g, p);
    }
  }
  return out;
}

std::vector<int> MaskFingers(unsigned mask) {
  std::vector<int> out;
  for (int f = 0; f < 32; ++f) {
    if (mask & (1u << f)) out.push_back(f);
  }
  return out;
}

std::string SubsetName(unsigned mask, const std::vector<std::string>& finger_names) {
  std::string out;
  for (int f : MaskFingers(mask)) {
    if (!out.empty()) out += "+";
    out += f < static_cast<int>(finger_names.size()) ? finger_names[f] : "F" + std::to_string(f);
  }
  return out;
}

std::vector<SubjectMatch> FuseSubset(const std::vector<int>& positions,
                                     const std::vector<std::vector<SearchCandidate>>& per_finger, unsigned mask,
                                     TenPrintFusion fusion) {
  std::vector<int> sub_positions;
  std::vector<std::vector<SearchCandidate>> sub_lists;
  for (int f : MaskFingers(mask)) {
    if (f >= static_cast<int>(per_finger.size())) break;
    sub_positions.push_back(positions[f]);
    sub_lists.push_back(per_finger[f]);
  }
  return FuseBySubject(sub_positions, sub_lists, fusion, std::numeric_limits<int>::max());
}

MateRank SubjectRank(const std::vector<SubjectMatch>& fused, const std::string& subject) {
  std::vector<SearchCandidate> as_candidates;
  as_candidates.reserve(fused.size());
  for (const SubjectMatch& m : fused) as_candidates.push_back({m.subject_id, m.score, nullptr});
  return RankOfMate(as_candidates, [&](const std::string& id) { return id == subject; });
}

double SignTestP(int b, int c) {
  const int n = b + c;
  if (n <= 0) return 1;
  // P(X = k) for X ~ Binomial(n, 1/2), in logs (n may be hundreds).
  const auto log_pmf = [n](int k) {
    return std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) - n * std::log(2.0);
  };
  const double dev = std::fabs(b - n / 2.0);
  double p = 0;
  for (int k = 0; k <= n; ++k) {
    if (std::fabs(k - n / 2.0) >= dev - 1e-9) p += std::exp(log_pmf(k));
  }
  return std::min(1.0, p);
}

double TpirAtFpir(const std::vector<float>& mated, std::vector<float> nonmated_top, double fpir, float* threshold) {
  const size_t n = nonmated_top.size();
  // Allowed false positives; the threshold sits at the next non-mate down.
  const size_t allowed = static_cast<size_t>(std::floor(fpir * static_cast<double>(n) + 1e-9));
  for (float& s : nonmated_top) {
    if (std::isnan(s)) s = -std::numeric_limits<float>::infinity();
  }
  std::sort(nonmated_top.begin(), nonmated_top.end(), [](float a, float b) { return a > b; });
  const float t = allowed < n ? nonmated_top[allowed] : -std::numeric_limits<float>::infinity();
  if (threshold != nullptr) *threshold = t;
  if (mated.empty()) return 0;
  size_t hits = 0;
  for (float s : mated) hits += !std::isnan(s) && s > t;
  return static_cast<double>(hits) / static_cast<double>(mated.size());
}

double ErrorReduction(int errors_a, int errors_b) {
  if (errors_a <= 0) return 0;
  return static_cast<double>(errors_a - errors_b) / errors_a;
}

}  // namespace tessera::fingerprint
