// LssrSearcher on the CPU: results equal a brute-force ranking with the
// plain LSS-R reference, deletions and replacements are honoured (also
// across a rebuild), persisted cylinders give the same scores, and searches
// run safely while templates are added and removed.
#include "services/fingerprint/search/searcher.h"

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/search/dmc_matcher.h"
#include "services/fingerprint/store/gallery_test_util.h"

namespace tessera {
namespace fingerprint {
namespace {

using gallery_testing::EntriesOf;

std::unique_ptr<GallerySearcher> CpuSearcher() {
  auto s = CreateSearcher({"lssr", "cpu"});
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(*s);
}

// Brute force: every live template scored with the plain reference.
std::vector<SearchCandidate> BruteForce(const std::vector<MinutiaPoint>& probe,
                                        const std::vector<std::shared_ptr<const StoredTemplate>>& gallery, int k) {
  const LssConstants c = MakeLssConstants({});
  const MccTemplate a = cpu::BuildMccTemplate(probe);
  std::vector<std::pair<float, int>> ranked;
  for (size_t i = 0; i < gallery.size(); ++i) {
    ranked.emplace_back(cpu::ReferenceScore(a, cpu::BuildMccTemplate(gallery[i]->minutiae), MccScore::kLssR, c),
                        static_cast<int>(i));
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](auto& x, auto& y) { return x.first > y.first; });
  std::vector<SearchCandidate> out;
  for (int i = 0; i < k && i < static_cast<int>(ranked.size()); ++i) {
    out.push_back({gallery[ranked[i].second]->id, ranked[i].first});
  }
  return out;
}

void ExpectSameCandidates(const std::vector<SearchCandidate>& got, const std::vector<SearchCandidate>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].id, want[i].id) << "rank " << i;
    EXPECT_EQ(got[i].score, want[i].score) << "rank " << i;
  }
}

TEST(SearcherTest, UnknownMatcherAndBadArguments) {
  EXPECT_EQ(CreateSearcher({"nope", "cpu"}).status().code(), absl::StatusCode::kInvalidArgument);
  auto s = CpuSearcher();
  auto empty = s->Search({testing::SyntheticTemplates(1, 1)[0]}, 5);
  ASSERT_TRUE(empty.ok());
  ASSERT_EQ(empty->size(), 1u);
  EXPECT_TRUE((*empty)[0].empty());  // empty gallery: no candidates
  EXPECT_EQ(s->Search({testing::SyntheticTemplates(1, 1)[0]}, 0).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<MinutiaPoint> bad = {{1, 2, 0}, {std::nanf(""), 3, 0}};
  EXPECT_EQ(s->Search({bad}, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s->VerifyId(testing::SyntheticTemplates(1, 1)[0], "missing").status().code(), absl::StatusCode::kNotFound);
}

// A filtered search equals an unfiltered one over only the accepted
// templates, for every matcher path on the CPU, also after a rebuild.
TEST(SearcherTest, FilterLimitsCandidatesToAcceptedFingersAndImpressions) {
  const auto points = testing::TestTemplates(1, 60, 13);
  std::vector<std::shared_ptr<const StoredTemplate>> all, accepted;
  for (size_t i = 0; i < points.size(); ++i) {
    auto t = std::make_shared<StoredTemplate>();
    t->id = absl::StrCat("f", i);
    t->minutiae = points[i];
    t->seq = i + 1;
    t->metadata.finger_position = 1 + static_cast<int>(i % 10);
    t->metadata.impression_type = i % 3 == 0 ? kUnknownImpressionType : static_cast<int>(i % 2);
    all.push_back(t);
    if ((t->metadata.finger_position == 2 || t->metadata.finger_position == 7) && t->metadata.impression_type != 1) {
      accepted.push_back(t);
    }
  }
  ASSERT_GT(accepted.size(), 5u);
  SearchOptions options;
  options.top_k = 5;
  options.filter.finger_positions = {2, 7};
  options.filter.impression_types = {0, kUnknownImpressionType};
  const std::vector<std::vector<MinutiaPoint>> probes = {points[1], points[6], points[30]};
  for (const char* matcher : {"lssr", "dmc", "fusion", "cascade"}) {
    auto filtered = CreateSearcher({matcher, "cpu"});
    auto subset = CreateSearcher({matcher, "cpu"});
    ASSERT_TRUE(filtered.ok() && subset.ok());
    ASSERT_TRUE((*filtered)->Add(all).ok());
    ASSERT_TRUE((*subset)->Add(accepted).ok());
    auto got = (*filtered)->Search(probes, options);
    SearchOptions plain = options;
    plain.filter = {};
    auto want = (*subset)->Search(probes, plain);
    ASSERT_TRUE(got.ok() && want.ok()) << got.status() << want.status();
    for (size_t p = 0; p < probes.size(); ++p) {
      SCOPED_TRACE(absl::StrCat(matcher, " probe ", p));
      ExpectSameCandidates((*got)[p], (*want)[p]);
    }
  }
  // Per-probe filters in one call equal one filtered call per probe.
  for (const char* matcher : {"lssr", "cascade"}) {
    auto s = CreateSearcher({matcher, "cpu"});
    ASSERT_TRUE(s.ok() && (*s)->Add(all).ok());
    SearchOptions per_probe;
    per_probe.top_k = 4;
    per_probe.probe_filters.resize(probes.size());
    per_probe.probe_filters[0].finger_positions = {3};
    per_probe.probe_filters[2].impression_types = {1};  // probe 1: no filter
    auto together = (*s)->Search(probes, per_probe);
    ASSERT_TRUE(together.ok()) << together.status();
    for (size_t p = 0; p < probes.size(); ++p) {
      SearchOptions one;
      one.top_k = 4;
      one.filter = per_probe.probe_filters[p];
      auto alone = (*s)->Search({probes[p]}, one);
      ASSERT_TRUE(alone.ok());
      SCOPED_TRACE(absl::StrCat(matcher, " per-probe filter, probe ", p));
      ExpectSameCandidates((*together)[p], (*alone)[0]);
    }
    per_probe.probe_filters.pop_back();
    EXPECT_EQ((*s)->Search(probes, per_probe).status().code(), absl::StatusCode::kInvalidArgument);
  }
  SearchOptions bad = options;
  bad.filter.finger_positions = {300};
  EXPECT_EQ(CpuSearcher()->Search(probes, bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SearcherTest, MatchesBruteForceWithDeletesAndReplacements) {
  const auto points = testing::TestTemplates(1, 60, 11);
  auto entries = EntriesOf(points, "g");
  auto s = CpuSearcher();
  ASSERT_TRUE(s->Add(entries).ok());
  EXPECT_EQ(s->size(), static_cast<int64_t>(points.size()));
  const std::vector<std::vector<MinutiaPoint>> probes = {points[3], points[17], points[40]};
  auto results = s->Search(probes, 7);
  ASSERT_TRUE(results.ok()) << results.status();
  for (size_t p = 0; p < probes.size(); ++p) ExpectSameCandidates((*results)[p], BruteForce(probes[p], entries, 7));
  EXPECT_EQ((*results)[0][0].id, "g3");  // a template finds itself first

  // Delete a few and replace one (the replacement takes another's minutiae).
  for (int i : {3, 5, 9}) ASSERT_TRUE(s->Remove(absl::StrCat("g", i)));
  EXPECT_FALSE(s->Remove("g3"));
  auto replacement = std::make_shared<StoredTemplate>();
  replacement->id = "g17";
  replacement->minutiae = points[0];
  replacement->seq = 1000;
  ASSERT_TRUE(s->Add({replacement}).ok());
  std::vector<std::shared_ptr<const StoredTemplate>> live;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i == 3 || i == 5 || i == 9 || i == 17) continue;
    live.push_back(entries[i]);
  }
  live.push_back(replacement);  // enrolled last
  results = s->Search(probes, 7);
  ASSERT_TRUE(results.ok());
  for (size_t p = 0; p < probes.size(); ++p) ExpectSameCandidates((*results)[p], BruteForce(probes[p], live, 7));
  // top_k beyond the gallery: all of it.
  results = s->Search({probes[1]}, 1000);
  ASSERT_TRUE(results.ok());
  EXPECT_EQ((*results)[0].size(), live.size());

  // Verify agrees with the search score.
  auto v = s->VerifyId(probes[1], (*results)[0][0].id);
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (*results)[0][0].score);
  auto c = s->Compare(probes[2], probes[2]);
  ASSERT_TRUE(c.ok());
  EXPECT_GT(*c, 0.5f);
}

TEST(SearcherTest, RebuildAfterManyDeletesKeepsResults) {
  const auto points = testing::SyntheticTemplates(300, 5);
  auto entries = EntriesOf(points, "s");
  auto s = CpuSearcher();
  ASSERT_TRUE(s->Add(entries).ok());
  std::vector<std::shared_ptr<const StoredTemplate>> live;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i % 3 == 0) {
      ASSERT_TRUE(s->Remove(entries[i]->id));  // 100 deletions: triggers a rebuild
    } else {
      live.push_back(entries[i]);
    }
  }
  EXPECT_EQ(s->size(), static_cast<int64_t>(live.size()));
  auto results = s->Search({points[4], points[7]}, 10);
  ASSERT_TRUE(results.ok());
  ExpectSameCandidates((*results)[0], BruteForce(points[4], live, 10));
  ExpectSameCandidates((*results)[1], BruteForce(points[7], live, 10));
  s->Compact();
  auto again = s->Search({points[4]}, 10);
  ASSERT_TRUE(again.ok());
  ExpectSameCandidates((*again)[0], (*results)[0]);
}

TEST(SearcherTest, PersistedCylindersGiveTheSameScores) {
  const auto points = testing::SyntheticTemplates(40, 9);
  auto entries = EntriesOf(points, "p");
  auto a = CpuSearcher();
  ASSERT_TRUE(a->Add(entries).ok());
  auto b = CpuSearcher();
  for (const auto& e : entries) {
    MccTemplate cyl;
    ASSERT_TRUE(a->ExportCylinders(*e, &cyl));
    ASSERT_TRUE(b->AddWithCylinders(e, std::move(cyl)).ok());
  }
  StoredTemplate stale = *entries[0];
  stale.seq = 999;  // another template under the same id
  MccTemplate unused;
  EXPECT_FALSE(a->ExportCylinders(stale, &unused));
  auto ra = a->Search({points[1], points[30]}, 5);
  auto rb = b->Search({points[1], points[30]}, 5);
  ASSERT_TRUE(ra.ok() && rb.ok());
  for (int p = 0; p < 2; ++p) ExpectSameCandidates((*rb)[p], (*ra)[p]);
}

TEST(SearcherTest, DmcScoresTheSameGalleryPerRequest) {
  const auto points = testing::TestTemplates(1, 40, 13);
  auto entries = EntriesOf(points, "d");
  auto s = CreateSearcher({"dmc", "cpu"});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->matcher(), "dmc");
  ASSERT_TRUE((*s)->Add(entries).ok());
  ASSERT_TRUE((*s)->Remove("d2"));
  // Brute force with the matcher itself over the live templates.
  auto dmc = DmcMatcher::Create(DmcMatcherOptions{});
  ASSERT_TRUE(dmc.ok());
  MccGallery live;
  std::vector<std::string> ids;
  for (size_t i = 0; i < points.size(); ++i) {
    if (i == 2) continue;
    live.Append(cpu::BuildMccTemplate(points[i]));
    ids.push_back(entries[i]->id);
  }
  for (int probe : {5, 21}) {
    SearchStats stats;
    auto got = (*s)->Search({points[probe]}, 6, &stats);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(stats.matcher, "dmc");
    auto want = dmc->ScoreGallery(Stream::Cpu(), cpu::BuildMccTemplate(points[probe]), live);
    ASSERT_TRUE(want.ok()) << want.status();
    std::vector<int> order(ids.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return (*want)[a] > (*want)[b]; });
    ASSERT_EQ((*got)[0].size(), 6u);
    for (int r = 0; r < 6; ++r) {
      EXPECT_EQ((*got)[0][r].id, ids[order[r]]) << "probe " << probe << " rank " << r;
      EXPECT_EQ((*got)[0][r].score, (*want)[order[r]]);
    }
    EXPECT_EQ((*got)[0][0].id, absl::StrCat("d", probe));
    // The same searcher scores LSS-R when asked.
    auto lssr = (*s)->Search({points[probe]}, 6, &stats, "lssr");
    ASSERT_TRUE(lssr.ok());
    EXPECT_EQ(stats.matcher, "lssr");
    EXPECT_EQ((*lssr)[0][0].id, absl::StrCat("d", probe));
    auto v = (*s)->VerifyId(points[probe], (*got)[0][1].id);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(*v, (*got)[0][1].score);
  }
  EXPECT_EQ((*s)->Search({points[0]}, 3, nullptr, "bogus").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SearcherTest, SearchesRunWhileTemplatesChange) {
  const auto points = testing::SyntheticTemplates(200, 21);
  auto entries = EntriesOf(points, "c");
  auto s = CpuSearcher();
  ASSERT_TRUE(s->Add({entries.begin(), entries.begin() + 50}).ok());
  std::atomic<bool> done{false};
  std::thread writer([&] {
    for (size_t i = 50; i < entries.size(); ++i) {
      ASSERT_TRUE(s->Add({entries[i]}).ok());
      if (i % 4 == 0) s->Remove(entries[i - 40]->id);
    }
    done = true;
  });
  int searches = 0;
  while (!done || searches < 3) {
    auto r = s->Search({points[searches % 50 + 100]}, 5);
    ASSERT_TRUE(r.ok());
    for (const SearchCandidate& c : (*r)[0]) EXPECT_EQ(c.id[0], 'c');
    ++searches;
  }
  writer.join();
  EXPECT_EQ(s->size(), 200 - 37);  // 37 removed (i = 52, 56, ..., 196)
  auto r = s->Search({points[199]}, 1);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0][0].id, "c199");
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
