#include "services/fingerprint/search/tenprint_search.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace tessera {
namespace fingerprint {

absl::StatusOr<TenPrintFusion> ParseTenPrintFusion(absl::string_view name) {
  if (name.empty() || name == "sum") return TenPrintFusion::kSum;
  if (name == "max") return TenPrintFusion::kMax;
  return absl::InvalidArgumentError(absl::StrCat("fusion: unknown rule '", name, "'; known: sum, max"));
}

std::vector<int> SameFingerPositions(int fgp) {
  if (fgp == 1 || fgp == 11) return {1, 11};
  if (fgp == 6 || fgp == 12) return {6, 12};
  return {fgp};
}

const char* TenPrintFusionName(TenPrintFusion fusion) { return fusion == TenPrintFusion::kMax ? "max" : "sum"; }

std::vector<SubjectMatch> FuseBySubject(const std::vector<int>& positions,
                                        const std::vector<std::vector<SearchCandidate>>& per_finger,
                                        TenPrintFusion fusion, int top_k) {
  // subject -> per card finger, its best template there (index into per_finger[f]).
  std::map<std::string, std::vector<int>> best;
  for (size_t f = 0; f < per_finger.size(); ++f) {
    for (size_t c = 0; c < per_finger[f].size(); ++c) {
      const SearchCandidate& cand = per_finger[f][c];
      if (cand.metadata == nullptr || cand.metadata->subject_id.empty()) continue;
      // The filter already holds a known position to its own; checked again
      // so that callers passing unfiltered lists get the same rule.
      if (positions[f] != 0) {
        const std::vector<int> same = SameFingerPositions(positions[f]);
        if (std::find(same.begin(), same.end(), cand.metadata->finger_position) == same.end()) continue;
      }
      std::vector<int>& slots = best[cand.metadata->subject_id];
      slots.resize(per_finger.size(), -1);
      // Candidates arrive best first: the first one of a subject is its best.
      if (slots[f] < 0) slots[f] = static_cast<int>(c);
    }
  }
  std::vector<SubjectMatch> out;
  out.reserve(best.size());
  for (const auto& [subject, slots] : best) {
    SubjectMatch m;
    m.subject_id = subject;
    for (size_t f = 0; f < slots.size(); ++f) {
      if (slots[f] < 0) continue;
      const SearchCandidate& cand = per_finger[f][slots[f]];
      m.fingers.push_back({positions[f], cand.id, cand.score});
      m.score = fusion == TenPrintFusion::kSum ? m.score + cand.score : std::max(m.score, cand.score);
    }
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const SubjectMatch& a, const SubjectMatch& b) {
    return a.score > b.score || (a.score == b.score && a.subject_id < b.subject_id);
  });
  if (static_cast<int>(out.size()) > top_k) out.resize(top_k);
  return out;
}

namespace {

absl::Status CheckCard(const std::vector<CardFinger>& card, const TenPrintOptions& options) {
  if (card.empty()) return absl::InvalidArgumentError("a ten-print search needs at least one finger");
  if (options.top_k < 1) return absl::InvalidArgumentError(absl::StrCat("top_k must be at least 1, got ", options.top_k));
  if (options.per_finger_candidates < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("per_finger_candidates must be >= 0, got ", options.per_finger_candidates));
  }
  return absl::OkStatus();
}

int PerFingerCandidates(const TenPrintOptions& options) {
  return options.per_finger_candidates > 0 ? options.per_finger_candidates : std::max(100, 10 * options.top_k);
}

TemplateFilter FilterOf(const CardFinger& f) {
  TemplateFilter filter;
  if (f.finger_position != 0) filter.finger_positions = SameFingerPositions(f.finger_position);
  return filter;
}

std::vector<int> PositionsOf(const std::vector<CardFinger>& card) {
  std::vector<int> positions;
  for (const CardFinger& f : card) positions.push_back(f.finger_position);
  return positions;
}

}  // namespace

absl::StatusOr<std::vector<SubjectMatch>> TenPrintSearchBatched(const std::vector<CardFinger>& card,
                                                                const TenPrintOptions& options,
                                                                const CardSearchFn& search) {
  TESSERA_RETURN_IF_ERROR(CheckCard(card, options));
  std::vector<std::vector<MinutiaPoint>> probes;
  std::vector<TemplateFilter> filters;
  for (const CardFinger& f : card) {
    probes.push_back(f.minutiae);
    filters.push_back(FilterOf(f));
  }
  TESSERA_ASSIGN_OR_RETURN(std::vector<std::vector<SearchCandidate>> candidates,
                           search(probes, filters, PerFingerCandidates(options)));
  if (candidates.size() != card.size()) {
    return absl::InternalError(absl::StrCat("a card search returned ", candidates.size(), " lists for ", card.size(),
                                            " fingers"));
  }
  return FuseBySubject(PositionsOf(card), candidates, options.fusion, options.top_k);
}

absl::StatusOr<std::vector<SubjectMatch>> TenPrintSearch(const std::vector<CardFinger>& card,
                                                         const TenPrintOptions& options, const FingerSearchFn& search) {
  TESSERA_RETURN_IF_ERROR(CheckCard(card, options));
  const int per_finger = PerFingerCandidates(options);
  std::vector<int> positions;
  std::vector<std::vector<SearchCandidate>> candidates;
  for (size_t i = 0; i < card.size(); ++i) {
    absl::StatusOr<std::vector<SearchCandidate>> found = search(card[i].minutiae, FilterOf(card[i]), per_finger);
    if (!found.ok()) {
      return Annotate(found.status(), absl::StrCat("finger ", i, " (FGP ", card[i].finger_position, ")"));
    }
    positions.push_back(card[i].finger_position);
    candidates.push_back(std::move(*found));
  }
  return FuseBySubject(positions, candidates, options.fusion, options.top_k);
}

}  // namespace fingerprint
}  // namespace tessera
