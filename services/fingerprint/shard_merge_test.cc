// Shard merge: a random gallery (with exact duplicates, so scores tie across
// shards) split into 3 consecutive shards, each searched by its own
// searcher, merges to exactly the single-gallery result for LSS-R and DMC
// and any top_k; duplicate ids count once; responses merge the same way,
// each candidate whole (metadata and explanation kept).
#include "services/fingerprint/shard_merge.h"

#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "kernels/fingerprint/test_templates.h"

namespace tessera {
namespace fingerprint {
namespace {

struct Entry {
  std::string id;
  std::vector<MinutiaPoint> minutiae;
};

std::unique_ptr<GallerySearcher> Searcher(const std::vector<Entry>& entries, size_t begin, size_t end) {
  auto s = CreateSearcher({"lssr", "cpu"});
  EXPECT_TRUE(s.ok());
  std::vector<std::shared_ptr<const StoredTemplate>> add;
  for (size_t i = begin; i < end; ++i) {
    auto t = std::make_shared<StoredTemplate>();
    t->id = entries[i].id;
    t->minutiae = entries[i].minutiae;
    t->seq = i + 1;
    add.push_back(t);
  }
  EXPECT_TRUE((*s)->Add(add).ok());
  return std::move(*s);
}

TEST(ShardMergeTest, ThreeShardsEqualOneGallery) {
  const auto points = testing::SyntheticTemplates(240, 101);
  // The enrolment order, with copies of earlier templates further on (in
  // later shards): their scores tie exactly with the originals'.
  std::vector<Entry> entries;
  for (int i = 0; i < 240; ++i) {
    entries.push_back({absl::StrCat("g", i), points[i]});
    if (i == 100) entries.push_back({"copy-of-g5", points[5]});
    if (i == 170) entries.push_back({"copy-of-g5-again", points[5]});
    if (i == 200) entries.push_back({"copy-of-g120", points[120]});
  }
  const size_t n = entries.size();
  auto whole = Searcher(entries, 0, n);
  std::vector<std::unique_ptr<GallerySearcher>> shards;
  for (int s = 0; s < 3; ++s) shards.push_back(Searcher(entries, n * s / 3, n * (s + 1) / 3));

  const std::vector<std::vector<MinutiaPoint>> probes = {points[5], points[120], points[33], points[239]};
  for (const std::string matcher : {"lssr", "dmc"}) {
    for (int top_k : {1, 3, 10, 500}) {
      auto want = whole->Search(probes, top_k, nullptr, matcher);
      ASSERT_TRUE(want.ok()) << want.status();
      std::vector<std::vector<std::vector<SearchCandidate>>> per_shard;
      for (auto& s : shards) {
        auto got = s->Search(probes, top_k, nullptr, matcher);
        ASSERT_TRUE(got.ok());
        per_shard.push_back(*got);
      }
      auto merged = MergeShardResults(per_shard, top_k);
      ASSERT_TRUE(merged.ok()) << merged.status();
      for (size_t p = 0; p < probes.size(); ++p) {
        const auto& w = (*want)[p];
        const auto& g = (*merged)[p];
        ASSERT_EQ(g.size(), w.size()) << matcher << " top " << top_k << " probe " << p;
        for (size_t r = 0; r < w.size(); ++r) {
          EXPECT_EQ(g[r].id, w[r].id) << matcher << " top " << top_k << " probe " << p << " rank " << r;
          EXPECT_EQ(g[r].score, w[r].score);
        }
      }
      // The ties are really there: g5 and its copies score the same.
      if (top_k >= 3) {
        EXPECT_EQ((*want)[0][0].id, "g5");
        EXPECT_EQ((*want)[0][1].id, "copy-of-g5");
        EXPECT_EQ((*want)[0][2].id, "copy-of-g5-again");
        EXPECT_EQ((*want)[0][0].score, (*want)[0][2].score);
      }
    }
  }
}

TEST(ShardMergeTest, DuplicateIdsCountOnceAndShapesAreChecked) {
  const std::vector<std::vector<SearchCandidate>> shards = {{{"a", 0.9f}, {"b", 0.5f}},
                                                            {{"a", 0.7f}, {"c", 0.5f}, {"d", 0.1f}}};
  auto m = MergeShardTopK(shards, 3);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[0].id, "a");
  EXPECT_EQ(m[0].score, 0.9f);
  EXPECT_EQ(m[1].id, "b");  // tie with c: the earlier shard first
  EXPECT_EQ(m[2].id, "c");
  EXPECT_TRUE(MergeShardTopK({}, 5).empty());
  EXPECT_EQ(MergeShardResults({{{}}, {{}, {}}}, 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(MergeShardResults({{{}}}, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShardMergeTest, ResponsesMerge) {
  v1::SearchBatchResponse a, b;
  auto add = [](v1::SearchBatchResponse* r, std::vector<std::pair<std::string, float>> cands) {
    v1::ProbeResult* p = r->add_results();
    for (auto& [id, score] : cands) {
      v1::Candidate* c = p->add_candidates();
      c->set_id(id);
      c->set_score(score);
    }
  };
  add(&a, {{"x", 0.8f}, {"y", 0.2f}});
  add(&b, {{"z", 0.9f}});
  a.mutable_timing()->set_gallery_size(10);
  a.mutable_timing()->set_score_ms(5);
  a.mutable_timing()->set_matcher("lssr");
  b.mutable_timing()->set_gallery_size(7);
  b.mutable_timing()->set_score_ms(9);
  auto m = MergeShardResponses({a, b}, 2);
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->results_size(), 1);
  ASSERT_EQ(m->results(0).candidates_size(), 2);
  EXPECT_EQ(m->results(0).candidates(0).id(), "z");
  EXPECT_EQ(m->results(0).candidates(1).id(), "x");
  EXPECT_EQ(m->timing().gallery_size(), 17);
  EXPECT_EQ(m->timing().score_ms(), 9);
  EXPECT_EQ(m->timing().matcher(), "lssr");
  v1::SearchBatchResponse two_probes = a;
  add(&two_probes, {});
  EXPECT_EQ(MergeShardResponses({two_probes, b}, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

// Candidates are copied whole: metadata and explanations survive the merge,
// each with its own candidate, and a duplicate id keeps its best copy's.
TEST(ShardMergeTest, ResponsesKeepMetadataAndExplanations) {
  auto candidate = [](const std::string& id, float score, const std::string& subject, int fgp, int pairs) {
    v1::Candidate c;
    c.set_id(id);
    c.set_score(score);
    c.mutable_metadata()->set_subject_id(subject);
    c.mutable_metadata()->set_finger_position(fgp);
    c.mutable_metadata()->set_impression_type(1);
    (*c.mutable_metadata()->mutable_attributes())["case"] = id;
    c.mutable_explanation()->set_score(score);
    c.mutable_explanation()->set_rms_residual(0.5);
    for (int i = 0; i < pairs; ++i) c.mutable_explanation()->add_pairs()->set_probe_index(i);
    return c;
  };
  v1::SearchBatchResponse a, b;
  *a.add_results()->add_candidates() = candidate("x", 0.8f, "S1", 2, 4);
  *a.mutable_results(0)->add_candidates() = candidate("dup", 0.3f, "S3", 5, 1);
  v1::Candidate plain;  // no metadata, no explanation
  plain.set_id("bare");
  plain.set_score(0.6f);
  *b.add_results()->add_candidates() = candidate("z", 0.9f, "S2", 7, 6);
  *b.mutable_results(0)->add_candidates() = plain;
  *b.mutable_results(0)->add_candidates() = candidate("dup", 0.5f, "S3", 5, 3);
  auto m = MergeShardResponses({a, b}, 10);
  ASSERT_TRUE(m.ok()) << m.status();
  const auto& got = m->results(0).candidates();
  ASSERT_EQ(got.size(), 4);
  EXPECT_EQ(got[0].SerializeAsString(), b.results(0).candidates(0).SerializeAsString());  // z, whole
  EXPECT_EQ(got[1].SerializeAsString(), a.results(0).candidates(0).SerializeAsString());  // x
  EXPECT_EQ(got[1].metadata().attributes().at("case"), "x");
  EXPECT_EQ(got[1].explanation().pairs_size(), 4);
  EXPECT_EQ(got[2].id(), "bare");
  EXPECT_FALSE(got[2].has_metadata());
  EXPECT_FALSE(got[2].has_explanation());
  EXPECT_EQ(got[3].id(), "dup");  // its better copy (shard b's)
  EXPECT_EQ(got[3].score(), 0.5f);
  EXPECT_EQ(got[3].explanation().pairs_size(), 3);
  EXPECT_EQ(got[3].metadata().subject_id(), "S3");
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
