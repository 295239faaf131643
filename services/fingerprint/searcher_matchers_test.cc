// The searcher's "fusion" and "cascade" matchers (searcher.h): bad options
// are refused naming the field; a cascade whose shortlist holds the whole
// gallery ranks exactly as fusion, a shorter one only re-ranks LSS-R's
// shortlist (at least top_k long) with fused scores; on real FVC2002
// templates both identify at least as well as LSS-R.
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/eval/eval.h"
#include "services/fingerprint/formats/fvc_data.h"
#include "services/fingerprint/search_request.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/store/gallery_test_util.h"

namespace tessera {
namespace fingerprint {
namespace {

using gallery_testing::EntriesOf;

std::unique_ptr<GallerySearcher> MakeSearcher(const std::string& matcher, int cascade_candidates = 200) {
  SearcherOptions o;
  o.matcher = matcher;
  o.device = "cpu";
  o.cascade_candidates = cascade_candidates;
  auto s = CreateSearcher(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

void ExpectInvalid(const absl::Status& status, const std::string& field) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(field), absl::string_view::npos) << status;
}

TEST(SearcherMatchersTest, NamesAndBadOptions) {
  EXPECT_EQ(SearcherMatchers(), (std::vector<std::string>{"lssr", "dmc", "fusion", "cascade"}));
  SearcherOptions o;
  o.device = "cpu";
  o.matcher = "Fusion";
  ExpectInvalid(CreateSearcher(o).status(), "matcher");
  o.matcher = "fusion";
  for (double w : {-0.1, 1.5, std::nan("")}) {
    o.fusion_weight = w;
    ExpectInvalid(CreateSearcher(o).status(), "fusion_weight");
  }
  o.fusion_weight = 0.5;
  for (int n : {0, -3, kMaxCascadeCandidates + 1}) {
    o.cascade_candidates = n;
    ExpectInvalid(CreateSearcher(o).status(), "cascade_candidates");
  }
  o.cascade_candidates = 1;
  auto s = CreateSearcher(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->matcher(), "fusion");
  ASSERT_TRUE((*s)->Add(EntriesOf(testing::SyntheticTemplates(4, 7))).ok());
  const std::vector<MinutiaPoint> probe = testing::SyntheticTemplates(1, 8)[0];
  ExpectInvalid((*s)->Search({probe}, 3, nullptr, "cascade ").status(), "matcher");
  SearchOptions bad;
  bad.matcher = "cascade";
  bad.cascade_candidates = -1;
  ExpectInvalid((*s)->Search({probe}, bad).status(), "cascade_candidates");
  ExpectInvalid((*s)->VerifyId(probe, "t0", "lss").status(), "matcher");

  // The request edge names the field too.
  google::protobuf::RepeatedPtrField<v1::FingerprintTemplate> none;
  ExpectInvalid(ParseSearch(none, 5, "bozorth", SearchLimits{}).status(), "matcher");
  EXPECT_TRUE(ParseSearch(none, 5, "cascade", SearchLimits{}).ok());
}

TEST(SearcherMatchersTest, CascadeShortlistBounds) {
  const auto gallery = EntriesOf(testing::SyntheticTemplates(40, 11));
  const auto probes = testing::SyntheticTemplates(3, 12);
  auto lssr = MakeSearcher("lssr");
  auto fusion = MakeSearcher("fusion");
  auto whole = MakeSearcher("cascade", 40);  // shortlist = the whole gallery
  auto short5 = MakeSearcher("cascade", 5);
  for (auto* s : {lssr.get(), fusion.get(), whole.get(), short5.get()}) ASSERT_TRUE(s->Add(gallery).ok());

  auto all_fused = fusion->Search(probes, 40);
  auto all_lssr = lssr->Search(probes, 40);
  ASSERT_TRUE(all_fused.ok() && all_lssr.ok());
  SearchStats stats;
  auto same = whole->Search(probes, 10, &stats);
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(stats.matcher, "cascade");
  for (size_t p = 0; p < probes.size(); ++p) {
    ASSERT_EQ((*same)[p].size(), 10u);
    for (int i = 0; i < 10; ++i) {
      EXPECT_EQ((*same)[p][i].id, (*all_fused)[p][i].id) << "probe " << p << " rank " << i;
      EXPECT_NEAR((*same)[p][i].score, (*all_fused)[p][i].score, 1e-6) << "probe " << p << " rank " << i;
    }
  }

  for (int top_k : {3, 5, 8}) {
    auto got = short5->Search(probes, top_k);
    ASSERT_TRUE(got.ok()) << got.status();
    // The shortlist is max(5, top_k) long: top_k 8 returns 8.
    const int shortlist = std::max(5, top_k);
    for (size_t p = 0; p < probes.size(); ++p) {
      ASSERT_EQ(static_cast<int>((*got)[p].size()), top_k);
      std::set<std::string> lssr_ids;
      for (int i = 0; i < shortlist; ++i) lssr_ids.insert((*all_lssr)[p][i].id);
      std::map<std::string, float> fused;
      for (const SearchCandidate& c : (*all_fused)[p]) fused[c.id] = c.score;
      for (int i = 0; i < top_k; ++i) {
        const SearchCandidate& c = (*got)[p][i];
        EXPECT_TRUE(lssr_ids.count(c.id)) << c.id << " is not in LSS-R's top " << shortlist;
        EXPECT_NEAR(c.score, fused[c.id], 1e-6) << c.id;
        if (i > 0) EXPECT_GE((*got)[p][i - 1].score, c.score);
      }
    }
  }
  // A per-call shortlist overrides the searcher's: 40 = fusion's ranking.
  SearchOptions wide;
  wide.top_k = 10;
  wide.matcher = "cascade";
  wide.cascade_candidates = 40;
  auto widened = short5->Search(probes, wide);
  ASSERT_TRUE(widened.ok());
  for (size_t p = 0; p < probes.size(); ++p) EXPECT_EQ((*widened)[p][0].id, (*all_fused)[p][0].id);

  // 1:1, cascade and fusion agree.
  auto c1 = short5->Compare(probes[0], gallery[0]->minutiae, "cascade");
  auto f1 = fusion->Compare(probes[0], gallery[0]->minutiae);
  ASSERT_TRUE(c1.ok() && f1.ok());
  EXPECT_EQ(*c1, *f1);
}

// The cascade re-scores the shortlists of all probes of a call together, cut
// into pieces and rounds (chunk_templates 5: pieces of at most 5 candidates,
// rounds of at most 15 templates, so rounds span probes and a probe spans
// rounds). Its scores must be exactly the fused scores of the same templates
// (fusion over the whole gallery), its candidates LSS-R's shortlist, with
// deleted templates never returned, and the lists identical to an unchunked
// cascade's.
TEST(SearcherMatchersTest, CascadeRescoresAllProbesTogetherExactly) {
  const auto gallery = EntriesOf(testing::SyntheticTemplates(60, 21));
  std::vector<std::vector<MinutiaPoint>> probes = testing::SyntheticTemplates(5, 22);
  probes.push_back(gallery[17]->minutiae);  // a probe with an exact mate
  SearcherOptions o;
  o.device = "cpu";
  o.cascade_candidates = 12;
  o.matcher = "cascade";
  o.chunk_templates = 5;
  auto chunked = CreateSearcher(o);
  o.chunk_templates = 0;
  auto plain = CreateSearcher(o);
  auto lssr = MakeSearcher("lssr");
  auto fusion = MakeSearcher("fusion");
  ASSERT_TRUE(chunked.ok() && plain.ok());
  for (GallerySearcher* s : {chunked->get(), plain->get(), lssr.get(), fusion.get()}) {
    ASSERT_TRUE(s->Add(gallery).ok());
    ASSERT_TRUE(s->Remove("t3"));
    ASSERT_TRUE(s->Remove("t40"));
  }
  auto all_lssr = lssr->Search(probes, 58);
  auto all_fused = fusion->Search(probes, 58);
  ASSERT_TRUE(all_lssr.ok() && all_fused.ok());
  for (int top_k : {4, 12}) {
    SCOPED_TRACE(top_k);
    auto got = (*chunked)->Search(probes, top_k);
    auto same = (*plain)->Search(probes, top_k);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(same.ok()) << same.status();
    for (size_t p = 0; p < probes.size(); ++p) {
      ASSERT_EQ(static_cast<int>((*got)[p].size()), top_k);
      std::set<std::string> shortlist;
      for (int i = 0; i < 12; ++i) shortlist.insert((*all_lssr)[p][i].id);
      std::map<std::string, float> fused;
      for (const SearchCandidate& c : (*all_fused)[p]) fused[c.id] = c.score;
      for (int i = 0; i < top_k; ++i) {
        const SearchCandidate& c = (*got)[p][i];
        EXPECT_TRUE(shortlist.count(c.id)) << "probe " << p << ": " << c.id;
        EXPECT_NE(c.id, "t3");
        EXPECT_NE(c.id, "t40");
        ASSERT_TRUE(fused.count(c.id)) << c.id;
        EXPECT_EQ(c.score, fused[c.id]) << "probe " << p << ": " << c.id;
        if (i > 0) EXPECT_GE((*got)[p][i - 1].score, c.score);
        EXPECT_EQ(c.id, (*same)[p][i].id) << "probe " << p << " rank " << i;
        EXPECT_EQ(c.score, (*same)[p][i].score) << "probe " << p << " rank " << i;
      }
    }
    EXPECT_EQ((*got)[5][0].id, "t17");  // the exact mate comes first
  }
}

// Rank-1 over all 80 impressions of DB1 and DB3 (the probe's own entry left
// out): fusion and a 10-long cascade at least as good as LSS-R.
TEST(SearcherMatchersTest, FvcRank1AtLeastLssr) {
  auto dir = FindFingerprintDataDir();
  if (!dir.ok()) GTEST_SKIP() << dir.status();
  for (int db : {1, 3}) {
    auto imps = LoadFvc2002(*dir, db);
    ASSERT_TRUE(imps.ok()) << imps.status();
    std::vector<std::vector<MinutiaPoint>> points;
    for (const FvcImpression& imp : *imps) points.push_back(ToMinutiaPoints(imp.view));
    const auto entries = EntriesOf(points);
    std::map<std::string, int> rank1;
    for (const std::string matcher : {"lssr", "fusion", "cascade"}) {
      auto s = MakeSearcher(matcher, 10);
      ASSERT_TRUE(s->Add(entries).ok());
      auto got = s->Search(points, 2);
      ASSERT_TRUE(got.ok()) << got.status();
      for (size_t p = 0; p < points.size(); ++p) {
        const auto& list = (*got)[p];
        const std::string& best = list[0].id == entries[p]->id ? list[1].id : list[0].id;
        const int g = std::stoi(best.substr(1));
        rank1[matcher] += (*imps)[g].finger == (*imps)[p].finger;
      }
    }
    std::printf("DB%d rank-1 of 80: lssr %d fusion %d cascade %d\n", db, rank1["lssr"], rank1["fusion"],
                rank1["cascade"]);
    EXPECT_GE(rank1["fusion"], rank1["lssr"]) << "DB" << db;
    EXPECT_GE(rank1["cascade"], rank1["lssr"]) << "DB" << db;
    EXPECT_GE(rank1["lssr"], 70) << "DB" << db;  // the data really loaded
  }
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
