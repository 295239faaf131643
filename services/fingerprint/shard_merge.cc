#include "services/fingerprint/shard_merge.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/search/top_k.h"

namespace tessera {
namespace fingerprint {
namespace {

// Where a candidate sits: its shard and its rank there.
struct Ranked {
  float score;  // sanitized
  int shard;
  int rank;
  const std::string* id;
};

bool RankedBefore(const Ranked& a, const Ranked& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.shard != b.shard) return a.shard < b.shard;
  return a.rank < b.rank;
}

// The merge of lists[s] (each best first) into the best top_k, each id
// once: (shard, rank) of each winner, best first. `score_of` and `id_of`
// read an element of a list.
template <typename List, typename ScoreOf, typename IdOf>
std::vector<Ranked> MergeRanked(const std::vector<const List*>& lists, int top_k, ScoreOf score_of, IdOf id_of) {
  std::vector<Ranked> all;
  for (size_t s = 0; s < lists.size(); ++s) {
    int r = 0;
    for (const auto& c : *lists[s]) {
      all.push_back({SanitizeScore(score_of(c)), static_cast<int>(s), r++, &id_of(c)});
    }
  }
  std::sort(all.begin(), all.end(), RankedBefore);
  std::vector<Ranked> out;
  std::unordered_set<std::string> seen;
  for (const Ranked& c : all) {
    if (static_cast<int>(out.size()) >= top_k) break;
    if (!seen.insert(*c.id).second) continue;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::vector<SearchCandidate> MergeShardTopK(const std::vector<std::vector<SearchCandidate>>& shards, int top_k) {
  std::vector<const std::vector<SearchCandidate>*> lists;
  for (const auto& s : shards) lists.push_back(&s);
  std::vector<SearchCandidate> out;
  for (const Ranked& r : MergeRanked(
           lists, top_k, [](const SearchCandidate& c) { return c.score; },
           [](const SearchCandidate& c) -> const std::string& { return c.id; })) {
    out.push_back(shards[r.shard][r.rank]);
  }
  return out;
}

absl::StatusOr<std::vector<std::vector<SearchCandidate>>> MergeShardResults(
    const std::vector<std::vector<std::vector<SearchCandidate>>>& shard_results, int top_k) {
  if (top_k < 1) return absl::InvalidArgumentError(absl::StrCat("top_k must be at least 1, got ", top_k));
  const size_t probes = shard_results.empty() ? 0 : shard_results[0].size();
  for (size_t s = 0; s < shard_results.size(); ++s) {
    if (shard_results[s].size() != probes) {
      return absl::InvalidArgumentError(absl::StrCat("shard ", s, " has results for ", shard_results[s].size(),
                                                     " probes; shard 0 for ", probes));
    }
  }
  std::vector<std::vector<SearchCandidate>> out(probes);
  std::vector<std::vector<SearchCandidate>> lists(shard_results.size());
  for (size_t p = 0; p < probes; ++p) {
    for (size_t s = 0; s < shard_results.size(); ++s) lists[s] = shard_results[s][p];
    out[p] = MergeShardTopK(lists, top_k);
  }
  return out;
}

absl::StatusOr<v1::SearchBatchResponse> MergeShardResponses(const std::vector<v1::SearchBatchResponse>& shards,
                                                             int top_k) {
  if (top_k < 1) return absl::InvalidArgumentError(absl::StrCat("top_k must be at least 1, got ", top_k));
  const int probes = shards.empty() ? 0 : shards[0].results_size();
  for (size_t s = 0; s < shards.size(); ++s) {
    if (shards[s].results_size() != probes) {
      return absl::InvalidArgumentError(absl::StrCat("shard ", s, " has results for ", shards[s].results_size(),
                                                     " probes; shard 0 for ", probes));
    }
  }
  v1::SearchBatchResponse out;
  using Candidates = google::protobuf::RepeatedPtrField<v1::Candidate>;
  std::vector<const Candidates*> lists(shards.size());
  for (int p = 0; p < probes; ++p) {
    for (size_t s = 0; s < shards.size(); ++s) lists[s] = &shards[s].results(p).candidates();
    v1::ProbeResult* r = out.add_results();
    // Whole candidates: metadata and explanation travel with id and score.
    for (const Ranked& w : MergeRanked(
             lists, top_k, [](const v1::Candidate& c) { return c.score(); },
             [](const v1::Candidate& c) -> const std::string& { return c.id(); })) {
      *r->add_candidates() = (*lists[w.shard])[w.rank];
    }
  }
  v1::SearchTiming* t = out.mutable_timing();
  for (size_t s = 0; s < shards.size(); ++s) {
    const v1::SearchTiming& st = shards[s].timing();
    if (s == 0) {
      t->set_backend(st.backend());
      t->set_matcher(st.matcher());
      t->set_batch_size(st.batch_size());
    }
    t->set_gallery_size(t->gallery_size() + st.gallery_size());
    t->set_queue_ms(t->queue_ms() + st.queue_ms());
    t->set_prepare_ms(std::max(t->prepare_ms(), st.prepare_ms()));
    t->set_score_ms(std::max(t->score_ms(), st.score_ms()));
    t->set_total_ms(std::max(t->total_ms(), st.total_ms()));
  }
  return out;
}

}  // namespace fingerprint
}  // namespace tessera
