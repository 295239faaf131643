// Ten-print fusion: per-subject sums and maxima over the card's fingers,
// position rules, candidates without subjects left out, and a whole search on
// a real searcher where one finger alone is ambiguous but the card is not.
#include "services/fingerprint/search/tenprint_search.h"

#include <memory>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "kernels/fingerprint/test_templates.h"

namespace tessera {
namespace fingerprint {
namespace {

SearchCandidate Cand(const std::string& id, float score, const std::string& subject, int fgp) {
  auto m = std::make_shared<TemplateMetadata>();
  m->subject_id = subject;
  m->finger_position = fgp;
  return {id, score, subject.empty() && fgp == 0 ? nullptr : m};
}

TEST(TenPrintSearchTest, SumAndMaxFusePerSubject) {
  // Finger 1 (right thumb): A is best; finger 2 (right index): B best, A close.
  const std::vector<int> positions = {1, 2};
  const std::vector<std::vector<SearchCandidate>> per_finger = {
      {Cand("a1", 0.6f, "A", 1), Cand("b1", 0.2f, "B", 1), Cand("x", 0.9f, "", 0), Cand("a1bis", 0.5f, "A", 1)},
      {Cand("b2", 0.5f, "B", 2), Cand("a2", 0.45f, "A", 2), Cand("c7", 0.99f, "C", 7)}};
  std::vector<SubjectMatch> sum = FuseBySubject(positions, per_finger, TenPrintFusion::kSum, 10);
  ASSERT_EQ(sum.size(), 2u);  // no subject "" (x), and C is at another position
  EXPECT_EQ(sum[0].subject_id, "A");
  EXPECT_FLOAT_EQ(sum[0].score, 0.6f + 0.45f);
  ASSERT_EQ(sum[0].fingers.size(), 2u);
  EXPECT_EQ(sum[0].fingers[0].id, "a1");  // its best template at that position
  EXPECT_EQ(sum[0].fingers[1].finger_position, 2);
  EXPECT_EQ(sum[1].subject_id, "B");
  EXPECT_FLOAT_EQ(sum[1].score, 0.7f);
  std::vector<SubjectMatch> max = FuseBySubject(positions, per_finger, TenPrintFusion::kMax, 1);
  ASSERT_EQ(max.size(), 1u);
  EXPECT_EQ(max[0].subject_id, "A");
  EXPECT_FLOAT_EQ(max[0].score, 0.6f);
  // A plain thumb (11) is the rolled right thumb's finger (1).
  std::vector<SubjectMatch> plain = FuseBySubject({11}, {{Cand("a1", 0.6f, "A", 1)}}, TenPrintFusion::kSum, 5);
  ASSERT_EQ(plain.size(), 1u);
  EXPECT_EQ(SameFingerPositions(12), (std::vector<int>{6, 12}));
  EXPECT_EQ(SameFingerPositions(3), (std::vector<int>{3}));
  // Unknown card position: any finger counts.
  std::vector<SubjectMatch> any = FuseBySubject({0}, {{Cand("c7", 0.99f, "C", 7)}}, TenPrintFusion::kSum, 5);
  ASSERT_EQ(any.size(), 1u);
  EXPECT_EQ(any[0].subject_id, "C");
}

TEST(TenPrintSearchTest, BadArgumentsAndFingerErrors) {
  FingerSearchFn none = [](const std::vector<MinutiaPoint>&, const TemplateFilter&, int) {
    return absl::StatusOr<std::vector<SearchCandidate>>(std::vector<SearchCandidate>{});
  };
  EXPECT_EQ(TenPrintSearch({}, {}, none).status().code(), absl::StatusCode::kInvalidArgument);
  TenPrintOptions bad;
  bad.top_k = 0;
  EXPECT_EQ(TenPrintSearch({{1, {}}}, bad, none).status().code(), absl::StatusCode::kInvalidArgument);
  FingerSearchFn failing = [](const std::vector<MinutiaPoint>&, const TemplateFilter&, int) {
    return absl::StatusOr<std::vector<SearchCandidate>>(absl::DeadlineExceededError("late"));
  };
  auto r = TenPrintSearch({{3, {}}}, {}, failing);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(std::string(r.status().message()).find("FGP 3"), std::string::npos) << r.status();
  EXPECT_FALSE(ParseTenPrintFusion("median").ok());
  EXPECT_EQ(*ParseTenPrintFusion(""), TenPrintFusion::kSum);
}

// Subjects S0..S9 with fingers 1-4 each (distinct real-like templates); the
// card of S3 (its templates again) finds S3 first, with all four fingers,
// each finger searching only its own position.
TEST(TenPrintSearchTest, CardFindsItsSubjectOnARealSearcher) {
  const auto points = testing::TestTemplates(1, 40, 29);
  auto searcher = CreateSearcher({"lssr", "cpu"});
  ASSERT_TRUE(searcher.ok());
  std::vector<std::shared_ptr<const StoredTemplate>> gallery;
  for (int s = 0; s < 10; ++s) {
    for (int f = 1; f <= 4; ++f) {
      auto t = std::make_shared<StoredTemplate>();
      t->id = absl::StrCat("S", s, "_", f);
      t->minutiae = points[s * 4 + (f - 1)];
      t->seq = gallery.size() + 1;
      t->metadata.subject_id = absl::StrCat("S", s);
      t->metadata.finger_position = f;
      gallery.push_back(t);
    }
  }
  ASSERT_TRUE((*searcher)->Add(gallery).ok());
  std::vector<CardFinger> card;
  for (int f = 1; f <= 4; ++f) card.push_back({f, points[3 * 4 + (f - 1)]});
  int searches = 0;
  FingerSearchFn search = [&](const std::vector<MinutiaPoint>& probe, const TemplateFilter& filter, int k) {
    ++searches;
    EXPECT_FALSE(filter.finger_positions.empty());
    SearchOptions o;
    o.top_k = k;
    o.filter = filter;
    absl::StatusOr<std::vector<std::vector<SearchCandidate>>> r = (*searcher)->Search({probe}, o);
    if (!r.ok()) return absl::StatusOr<std::vector<SearchCandidate>>(r.status());
    for (const SearchCandidate& c : (*r)[0]) EXPECT_TRUE(filter.Accepts(*c.metadata)) << c.id;
    return absl::StatusOr<std::vector<SearchCandidate>>(std::move((*r)[0]));
  };
  TenPrintOptions options;
  options.top_k = 3;
  auto subjects = TenPrintSearch(card, options, search);
  ASSERT_TRUE(subjects.ok()) << subjects.status();
  EXPECT_EQ(searches, 4);
  // The whole card in one call (per-probe filters) gives the same subjects.
  CardSearchFn batched = [&](const std::vector<std::vector<MinutiaPoint>>& probes,
                             const std::vector<TemplateFilter>& filters, int k) {
    SearchOptions o;
    o.top_k = k;
    o.probe_filters = filters;
    return (*searcher)->Search(probes, o);
  };
  auto together = TenPrintSearchBatched(card, options, batched);
  ASSERT_TRUE(together.ok()) << together.status();
  ASSERT_EQ(together->size(), subjects->size());
  for (size_t i = 0; i < subjects->size(); ++i) {
    EXPECT_EQ((*together)[i].subject_id, (*subjects)[i].subject_id);
    EXPECT_EQ((*together)[i].score, (*subjects)[i].score);
  }
  ASSERT_EQ(subjects->size(), 3u);
  EXPECT_EQ((*subjects)[0].subject_id, "S3");
  EXPECT_EQ((*subjects)[0].fingers.size(), 4u);
  EXPECT_GT((*subjects)[0].score, (*subjects)[1].score);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
