// The searcher with LSS-R scoring on the GPU (the ALFI pipeline, rebuilt as
// the gallery grows, the tail appended since scored on the CPU; deletions
// excluded in the pipeline's top-k merge) against the
// same searcher on the CPU. The kernels are bit-identical to the CPU
// reference (lss.h), so candidates must agree exactly; scores are compared
// at 1e-6 to make a mismatch readable.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/testing/gpu_test.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/search/searcher.h"
#include "services/fingerprint/store/gallery_test_util.h"

namespace tessera {
namespace fingerprint {
namespace {

using gallery_testing::EntriesOf;

void ExpectSameResults(GallerySearcher& gpu, GallerySearcher& cpu,
                       const std::vector<std::vector<MinutiaPoint>>& probes, int k, double tolerance = 1e-6) {
  SearchStats gpu_stats;
  auto g = gpu.Search(probes, k, &gpu_stats);
  auto c = cpu.Search(probes, k);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(gpu_stats.backend, "cuda");
  for (size_t p = 0; p < probes.size(); ++p) {
    ASSERT_EQ((*g)[p].size(), (*c)[p].size());
    for (size_t i = 0; i < (*g)[p].size(); ++i) {
      EXPECT_EQ((*g)[p][i].id, (*c)[p][i].id) << "probe " << p << " rank " << i;
      EXPECT_NEAR((*g)[p][i].score, (*c)[p][i].score, tolerance) << "probe " << p << " rank " << i;
    }
  }
}

TEST(SearcherCudaTest, GpuSearchEqualsCpuSearchAsTheGalleryChanges) {
  TESSERA_SKIP_WITHOUT_GPU();
  // Real templates (random, non-trivial minutiae sets) plus synthetic ones.
  std::vector<std::vector<MinutiaPoint>> points = testing::RealTemplates(1);
  for (auto& t : testing::SyntheticTemplates(3000, 77)) points.push_back(std::move(t));
  auto gpu = CreateSearcher({"lssr", "cuda"});
  auto cpu = CreateSearcher({"lssr", "cpu"});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const size_t first = 2000;
  ASSERT_TRUE((*gpu)->Add(EntriesOf(points, "t", 0, first)).ok());
  ASSERT_TRUE((*cpu)->Add(EntriesOf(points, "t", 0, first)).ok());
  std::vector<std::vector<MinutiaPoint>> probes;
  for (size_t i = 0; i < 12; ++i) probes.push_back(points[i * 97 % points.size()]);
  ExpectSameResults(**gpu, **cpu, probes, 25);
  // A small addition stays on the CPU tail; deletions are filtered.
  ASSERT_TRUE((*gpu)->Add(EntriesOf(points, "t", first, first + 50)).ok());
  ASSERT_TRUE((*cpu)->Add(EntriesOf(points, "t", first, first + 50)).ok());
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE((*gpu)->Remove(absl::StrCat("t", i * 7)));
    ASSERT_TRUE((*cpu)->Remove(absl::StrCat("t", i * 7)));
  }
  ExpectSameResults(**gpu, **cpu, probes, 25);
  // A large addition triggers a re-upload.
  ASSERT_TRUE((*gpu)->Add(EntriesOf(points, "t", first + 50, points.size())).ok());
  ASSERT_TRUE((*cpu)->Add(EntriesOf(points, "t", first + 50, points.size())).ok());
  ExpectSameResults(**gpu, **cpu, probes, 25);
}

// The GPU path (ALFI pipeline) stops with the control's status instead of
// falling back to the CPU, and the searcher works normally afterwards.
// A filter (finger positions, impression types) on the GPU pipeline's
// exclusion list gives the CPU's filtered top-k, for LSS-R and the cascade.
TEST(SearcherCudaTest, FilteredSearchOnTheGpuEqualsTheCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::vector<std::vector<MinutiaPoint>> points = testing::RealTemplates(1);
  for (auto& t : testing::SyntheticTemplates(3000, 91)) points.push_back(std::move(t));
  std::vector<std::shared_ptr<const StoredTemplate>> entries;
  for (size_t i = 0; i < points.size(); ++i) {
    auto t = std::make_shared<StoredTemplate>();
    t->id = absl::StrCat("f", i);
    t->minutiae = points[i];
    t->seq = i + 1;
    t->metadata.subject_id = absl::StrCat("s", i / 10);
    t->metadata.finger_position = 1 + static_cast<int>(i % 10);
    t->metadata.impression_type = static_cast<int>(i % 3);
    entries.push_back(std::move(t));
  }
  std::vector<std::vector<MinutiaPoint>> probes;
  for (size_t i = 0; i < 8; ++i) probes.push_back(points[i * 131 % points.size()]);
  for (const char* matcher : {"lssr", "cascade"}) {
    auto gpu = CreateSearcher({matcher, "cuda"});
    auto cpu = CreateSearcher({matcher, "cpu"});
    ASSERT_TRUE(gpu.ok() && cpu.ok());
    ASSERT_TRUE((*gpu)->Add(entries).ok());
    ASSERT_TRUE((*cpu)->Add(entries).ok());
    SearchOptions o;
    o.top_k = 20;
    o.filter.finger_positions = {2, 7};
    o.filter.impression_types = {0, 1};
    SearchStats stats;
    // Half the probes with their own finger positions (a card's fingers).
    o.probe_filters.assign(probes.size(), o.filter);
    for (size_t p = 0; p < probes.size(); p += 2) o.probe_filters[p].finger_positions = {1 + static_cast<int>(p)};
    auto g = (*gpu)->Search(probes, o, &stats);
    auto c = (*cpu)->Search(probes, o);
    ASSERT_TRUE(g.ok() && c.ok());
    EXPECT_EQ(stats.backend, "cuda");
    for (size_t p = 0; p < probes.size(); ++p) {
      ASSERT_EQ((*g)[p].size(), (*c)[p].size()) << matcher;
      for (size_t i = 0; i < (*g)[p].size(); ++i) {
        EXPECT_EQ((*g)[p][i].id, (*c)[p][i].id) << matcher << " probe " << p << " rank " << i;
        ASSERT_NE((*g)[p][i].metadata, nullptr);
        EXPECT_TRUE(o.probe_filters[p].Accepts(*(*g)[p][i].metadata));
      }
    }
  }
}

TEST(SearcherCudaTest, GpuPipelineStopsWhenCancelled) {
  TESSERA_SKIP_WITHOUT_GPU();
  const auto points = testing::SyntheticTemplates(3000, 79);
  auto gpu = CreateSearcher({"lssr", "cuda"});
  auto cpu = CreateSearcher({"lssr", "cpu"});
  ASSERT_TRUE(gpu.ok() && cpu.ok());
  ASSERT_TRUE((*gpu)->Add(EntriesOf(points, "t", 0, points.size())).ok());
  ASSERT_TRUE((*cpu)->Add(EntriesOf(points, "t", 0, points.size())).ok());
  const std::vector<std::vector<MinutiaPoint>> probes = {points[1], points[2000]};
  // Calls 1-2: before and after the probes are prepared; 3: the pipeline's
  // first poll.
  int calls = 0;
  SearchControl control;
  control.check = [&]() -> absl::Status {
    return ++calls >= 3 ? absl::CancelledError("gone") : absl::OkStatus();
  };
  SearchOptions options;
  options.control = &control;
  EXPECT_EQ((*gpu)->Search(probes, options).status().code(), absl::StatusCode::kCancelled);
  ExpectSameResults(**gpu, **cpu, probes, 10);
}

// DMC: kernels 2-4 on the GPU stream, final stage on the CPU, against the
// all-CPU matcher (the kernels are bit-identical to their reference; 1e-5
// leaves room for the final stage's thread partitioning only).
TEST(SearcherCudaTest, DmcOnTheGpuEqualsDmcOnTheCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::vector<std::vector<MinutiaPoint>> points = testing::RealTemplates(2);
  for (auto& t : testing::SyntheticTemplates(400, 78)) points.push_back(std::move(t));
  auto gpu = CreateSearcher({"dmc", "cuda"});
  auto cpu = CreateSearcher({"dmc", "cpu"});
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  ASSERT_TRUE((*gpu)->Add(EntriesOf(points, "t", 0, points.size())).ok());
  ASSERT_TRUE((*cpu)->Add(EntriesOf(points, "t", 0, points.size())).ok());
  std::vector<std::vector<MinutiaPoint>> probes;
  for (size_t i = 0; i < 6; ++i) probes.push_back(points[i * 61 % points.size()]);
  ExpectSameResults(**gpu, **cpu, probes, 10, 1e-5);
}

// Fusion (CPU LSS-R + DMC kernels on the GPU stream) and the cascade (LSS-R
// through the ALFI pipeline, then the shortlists' DMC kernels on the GPU
// stream and the final stage on the CPU) against the all-CPU searcher (whose
// cascade runs kernels and final stage per pair on the CPU); 1e-5 as for DMC.
TEST(SearcherCudaTest, FusionAndCascadeOnTheGpuEqualTheCpu) {
  TESSERA_SKIP_WITHOUT_GPU();
  std::vector<std::vector<MinutiaPoint>> points = testing::RealTemplates(2);
  for (auto& t : testing::SyntheticTemplates(1500, 79)) points.push_back(std::move(t));
  // chunk_templates 7: the cascade's GPU re-scoring in pieces of 7 and
  // rounds of 21 templates (rounds span probes, probes span rounds).
  for (const auto& [matcher, chunk] : {std::pair<std::string, int>{"fusion", 0}, {"cascade", 0}, {"cascade", 7}}) {
    SearcherOptions o;
    o.matcher = matcher;
    o.cascade_candidates = 50;
    o.device = "cuda";
    o.chunk_templates = chunk;
    auto gpu = CreateSearcher(o);
    o.device = "cpu";
    o.chunk_templates = 0;
    auto cpu = CreateSearcher(o);
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    ASSERT_TRUE(cpu.ok()) << cpu.status();
    ASSERT_TRUE((*gpu)->Add(EntriesOf(points, "t", 0, points.size())).ok());
    ASSERT_TRUE((*cpu)->Add(EntriesOf(points, "t", 0, points.size())).ok());
    std::vector<std::vector<MinutiaPoint>> probes;
    for (size_t i = 0; i < 5; ++i) probes.push_back(points[i * 97 % points.size()]);
    SCOPED_TRACE(matcher + " chunk " + std::to_string(chunk));
    ExpectSameResults(**gpu, **cpu, probes, 10, 1e-5);
  }
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
