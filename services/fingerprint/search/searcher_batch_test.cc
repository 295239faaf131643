// The searcher's batch path and its SearchControl on the CPU: many probes in
// one call (gallery cut into chunks, deletions in between) give exactly the
// results of one probe at a time; a control stops LSS-R and DMC searches
// between chunks with its status; probes no longer wanted are skipped while
// the others finish; progress is reported per chunk.
#include <atomic>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/store/gallery_test_util.h"

namespace tessera {
namespace fingerprint {
namespace {

using gallery_testing::EntriesOf;

std::unique_ptr<GallerySearcher> Make(const std::string& matcher, int chunk_templates,
                                      const std::vector<std::vector<MinutiaPoint>>& points) {
  SearcherOptions o;
  o.matcher = matcher;
  o.device = "cpu";
  o.chunk_templates = chunk_templates;
  auto s = CreateSearcher(o);
  EXPECT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE((*s)->Add(EntriesOf(points)).ok());
  return std::move(*s);
}

void ExpectSame(const std::vector<SearchCandidate>& got, const std::vector<SearchCandidate>& want,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].id, want[i].id) << what << " rank " << i;
    EXPECT_EQ(got[i].score, want[i].score) << what << " rank " << i;
  }
}

TEST(SearcherBatchTest, ChunkedBatchEqualsOneProbeAtATime) {
  const auto points = testing::SyntheticTemplates(260, 31);
  auto chunked = Make("lssr", 37, points);   // 8 chunks, cut anywhere
  auto whole = Make("lssr", 0, points);      // one chunk
  for (int i = 0; i < 260; i += 9) {
    ASSERT_TRUE(chunked->Remove(absl::StrCat("t", i)));
    ASSERT_TRUE(whole->Remove(absl::StrCat("t", i)));
  }
  std::vector<std::vector<MinutiaPoint>> probes;
  for (int i = 0; i < 24; ++i) probes.push_back(points[(i * 11 + 1) % 260]);
  // Duplicate templates make exact score ties: ranks must break them alike.
  probes.push_back(points[5]);
  for (int top_k : {1, 7, 300}) {
    SearchStats stats;
    auto batch = chunked->Search(probes, top_k, &stats);
    ASSERT_TRUE(batch.ok()) << batch.status();
    EXPECT_EQ(stats.chunks, 8);
    for (size_t p = 0; p < probes.size(); ++p) {
      auto alone = whole->Search({probes[p]}, top_k);
      ASSERT_TRUE(alone.ok());
      ExpectSame((*batch)[p], (*alone)[0], absl::StrCat("top ", top_k, " probe ", p));
    }
  }
}

TEST(SearcherBatchTest, DmcBatchEqualsOneProbeAtATime) {
  const auto points = testing::SyntheticTemplates(90, 41);
  auto chunked = Make("dmc", 25, points);
  auto whole = Make("dmc", 0, points);
  std::vector<std::vector<MinutiaPoint>> probes = {points[3], points[50], points[89]};
  auto batch = chunked->Search(probes, 5);
  ASSERT_TRUE(batch.ok()) << batch.status();
  for (size_t p = 0; p < probes.size(); ++p) {
    auto alone = whole->Search({probes[p]}, 5);
    ASSERT_TRUE(alone.ok());
    ExpectSame((*batch)[p], (*alone)[0], absl::StrCat("probe ", p));
  }
}

// The control stops the search once the first chunk is done.
void ExpectStopsAfterFirstChunk(const std::string& matcher) {
  const auto points = testing::SyntheticTemplates(200, 51);
  auto s = Make(matcher, 20, points);  // 10 chunks
  std::atomic<bool> cancel{false};
  std::atomic<int> chunks_reported{0};
  SearchControl control;
  control.check = CancelFlagCheck(&cancel);
  control.progress = [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, 200);
    if (++chunks_reported == 1) {
      EXPECT_EQ(done, 20);
      cancel = true;
    }
  };
  SearchOptions options;
  options.top_k = 5;
  options.control = &control;
  auto got = s->Search({points[1], points[2], points[3]}, options);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled) << got.status();
  EXPECT_EQ(chunks_reported.load(), 1) << matcher;
}

TEST(SearcherBatchTest, LssrStopsBetweenChunks) { ExpectStopsAfterFirstChunk("lssr"); }
TEST(SearcherBatchTest, DmcStopsBetweenChunks) { ExpectStopsAfterFirstChunk("dmc"); }

TEST(SearcherBatchTest, StopsInsideAChunkToo) {
  // One chunk of the whole gallery: only the polls inside the parallel loop
  // can stop it; the check fails from its fourth call on (the first three:
  // before and after the probes are prepared, at the chunk start).
  const auto points = testing::SyntheticTemplates(400, 61);
  auto s = Make("lssr", 0, points);
  std::atomic<int> calls{0};
  SearchControl control;
  control.check = [&]() -> absl::Status {
    return ++calls >= 4 ? absl::DeadlineExceededError("too late") : absl::OkStatus();
  };
  control.poll_interval = absl::ZeroDuration();
  int chunks = 0;
  control.progress = [&](int64_t, int64_t) { ++chunks; };
  SearchOptions options;
  options.control = &control;
  auto got = s->Search({points[0], points[1]}, options);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(chunks, 0);
}

TEST(SearcherBatchTest, UnwantedProbesAreSkipped) {
  const auto points = testing::SyntheticTemplates(120, 71);
  auto s = Make("lssr", 30, points);
  SearchControl control;
  int wanted_calls_for_1 = 0;
  control.probe_wanted = [&](int p) {
    if (p == 1) ++wanted_calls_for_1;
    return p != 1;
  };
  SearchOptions options;
  options.top_k = 4;
  options.control = &control;
  auto got = s->Search({points[10], points[20], points[30]}, options);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE((*got)[1].empty());
  EXPECT_EQ(wanted_calls_for_1, 4);  // asked once per chunk
  for (int p : {0, 2}) {
    auto alone = s->Search({p == 0 ? points[10] : points[30]}, 4);
    ASSERT_TRUE(alone.ok());
    ExpectSame((*got)[p], (*alone)[0], absl::StrCat("probe ", p));
  }
  // Nobody wants anything: nothing is scored, no error (the check decides).
  control.probe_wanted = [](int) { return false; };
  SearchStats stats;
  got = s->Search({points[10]}, options, &stats);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(stats.chunks, 0);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
