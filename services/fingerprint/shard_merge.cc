#include "services/fingerprint/shard_merge.h"

#include <algorithm>
#include <string>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "services/fingerprint/search/top_k.h"

namespace tessera {
namespace fingerprint {
namespace {

struct Ranked {
  float score;  // sanitized
  int shard;
  int rank;
  const SearchCandidate* candidate;
};

bool RankedBefore(const Ranked& a, const Ranked& b) {
  if (a.score != b.score) return a.score > b.score;
  if (a.shard != b.shard) return a.shard < b.shard;
  return a.rank < b.rank;
}

}  // namespace

std::vector<SearchCandidate> MergeShardTopK(const std::vector<std::vector<SearchCandidate>>& shards, int top_k) {
  std::vector<Ranked> all;
  for (size_t s = 0; s < shards.size(); ++s) {
    for (size_t r = 0; r < shards[s].size(); ++r) {
      all.push_back({SanitizeScore(shards[s][r].score), static_cast<int>(s), static_cast<int>(r), &shards[s][r]});
    }
  }
  std::sort(all.begin(), all.end(), RankedBefore);
  std::vector<SearchCandidate> out;
  std::unordered_set<std::string> seen;
  for (const Ranked& c : all) {
    if (static_cast<int>(out.size()) >= top_k) break;
    if (!seen.insert(c.candidate->id).second) continue;
    out.push_back(*c.candidate);
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
  std::vector<std::vector<std::vector<SearchCandidate>>> lists(shards.size());
  for (size_t s = 0; s < shards.size(); ++s) {
    for (const v1::ProbeResult& r : shards[s].results()) {
      std::vector<SearchCandidate>& probe = lists[s].emplace_back();
      for (const v1::Candidate& c : r.candidates()) probe.push_back({c.id(), c.score()});
    }
  }
  absl::StatusOr<std::vector<std::vector<SearchCandidate>>> merged = MergeShardResults(lists, top_k);
  if (!merged.ok()) return merged.status();
  v1::SearchBatchResponse out;
  for (const auto& probe : *merged) {
    v1::ProbeResult* r = out.add_results();
    for (const SearchCandidate& c : probe) {
      v1::Candidate* o = r->add_candidates();
      o->set_id(c.id);
      o->set_score(c.score);
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
