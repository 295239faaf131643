// The ALFI pipeline on the CPU backend: top-k per latent must equal the
// brute-force top-k of cpu::ScoreGallery over the whole gallery for any
// batch size, with and without overlap; bad options and inputs are clear
// errors.
#include "services/fingerprint/search/alfi_pipeline.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include "kernels/fingerprint/lss.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/test_templates.h"

namespace tessera {
namespace fingerprint {
namespace {

std::shared_ptr<MccGallery> MakeGallery(const std::vector<MccTemplate>& templates) {
  auto g = std::make_shared<MccGallery>();
  for (const MccTemplate& t : templates) g->Append(t);
  return g;
}

std::vector<MccTemplate> Build(const std::vector<std::vector<MinutiaPoint>>& pts) {
  std::vector<MccTemplate> out;
  for (const auto& p : pts) out.push_back(cpu::BuildMccTemplate(p));
  return out;
}

// Brute force: every latent against the whole gallery, then TopK.
std::vector<std::vector<Candidate>> BruteForce(const MccGallery& g, const std::vector<MccTemplate>& latents,
                                               MccScore kind, int k) {
  const LssConstants c = MakeLssConstants(LssParams());
  std::vector<std::vector<Candidate>> out;
  for (const MccTemplate& l : latents) {
    std::vector<float> scores(g.num_templates());
    cpu::ScoreGallery(PrepareProbe(l), g, kind, c, scores.data(), 2);
    out.push_back(TopK(scores.data(), g.num_templates(), k));
  }
  return out;
}

class AlfiPipelineCpu : public ::testing::Test {
 protected:
  void SetUp() override {
    // Real DB1 templates (or synthetic ones without the data) plus synthetic
    // ones: 80 + 57 templates, an odd count so batches do not divide it.
    auto pts = testing::TestTemplates(1, 80, 11);
    auto extra = testing::SyntheticTemplates(57, 12);
    pts.insert(pts.end(), extra.begin(), extra.end());
    pts.push_back({});  // an empty template scores 0
    templates_ = Build(pts);
    gallery_ = MakeGallery(templates_);
    for (int i : {0, 9, 33, 81, 100}) latents_.push_back(templates_[i]);
  }
  std::vector<MccTemplate> templates_;
  std::shared_ptr<MccGallery> gallery_;
  std::vector<MccTemplate> latents_;
};

TEST_F(AlfiPipelineCpu, TopKEqualsBruteForceForEveryBatching) {
  for (MccScore kind : {MccScore::kLssR, MccScore::kLss}) {
    const auto expected = BruteForce(*gallery_, latents_, kind, 10);
    for (int batch : {1, 7, 64, 1000}) {
      for (bool overlap : {true, false}) {
        PipelineOptions o;
        o.batch_templates = batch;
        o.top_k = 10;
        o.overlap = overlap;
        o.threads = 2;
        auto p = AlfiPipeline::Create(gallery_, o);
        ASSERT_TRUE(p.ok()) << p.status();
        EXPECT_EQ((*p)->num_batches(), (gallery_->num_templates() + batch - 1) / batch);
        LssBatchMatcher matcher(kind);
        PipelineStats stats;
        auto got = (*p)->Search(matcher, latents_, &stats);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ(got->size(), latents_.size());
        for (size_t l = 0; l < latents_.size(); ++l) {
          ASSERT_EQ((*got)[l].size(), 10u);
          for (int r = 0; r < 10; ++r) {
            EXPECT_EQ((*got)[l][r].template_index, expected[l][r].template_index)
                << "batch " << batch << " latent " << l << " rank " << r;
            EXPECT_EQ((*got)[l][r].score, expected[l][r].score);
          }
        }
        EXPECT_EQ(stats.batches, (*p)->num_batches());
        EXPECT_EQ(stats.latents, static_cast<int>(latents_.size()));
        EXPECT_EQ(stats.templates, gallery_->num_templates());
        EXPECT_GT(stats.wall_seconds, 0);
        EXPECT_GT(stats.kernel_seconds, 0);
        EXPECT_EQ(stats.upload_bytes, 0u);  // nothing moves on the CPU backend
      }
    }
  }
}

TEST_F(AlfiPipelineCpu, SelfIsTheBestCandidate) {
  PipelineOptions o;
  o.batch_templates = 16;
  o.top_k = 3;
  auto p = AlfiPipeline::Create(gallery_, o);
  ASSERT_TRUE(p.ok()) << p.status();
  LssBatchMatcher matcher;
  auto got = (*p)->Search(matcher, latents_);
  ASSERT_TRUE(got.ok()) << got.status();
  const int ids[] = {0, 9, 33, 81, 100};
  for (size_t l = 0; l < latents_.size(); ++l) {
    ASSERT_FALSE((*got)[l].empty());
    EXPECT_EQ((*got)[l][0].template_index, ids[l]);
    // Best first.
    for (size_t r = 1; r < (*got)[l].size(); ++r) EXPECT_TRUE(CandidateBefore((*got)[l][r - 1], (*got)[l][r]));
  }
}

TEST_F(AlfiPipelineCpu, TopKLargerThanGalleryAndEmptyInputs) {
  auto small = MakeGallery({templates_[0], templates_[1], templates_[2]});
  PipelineOptions o;
  o.batch_templates = 2;
  o.top_k = 50;
  auto p = AlfiPipeline::Create(small, o);
  ASSERT_TRUE(p.ok()) << p.status();
  LssBatchMatcher matcher;
  auto got = (*p)->Search(matcher, {templates_[1], MccTemplate()});
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[0].size(), 3u);
  EXPECT_EQ((*got)[0][0].template_index, 1);
  // An empty latent scores 0 everywhere: ties by index.
  ASSERT_EQ((*got)[1].size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ((*got)[1][r].template_index, r);
    EXPECT_EQ((*got)[1][r].score, 0.0f);
  }
  auto none = (*p)->Search(matcher, {});
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto empty_gallery = AlfiPipeline::Create(std::make_shared<MccGallery>(), o);
  ASSERT_TRUE(empty_gallery.ok());
  auto r = (*empty_gallery)->Search(matcher, {templates_[0]});
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_TRUE((*r)[0].empty());
}

TEST_F(AlfiPipelineCpu, BadOptionsAndInputs) {
  PipelineOptions o;
  o.batch_templates = 0;
  EXPECT_EQ(AlfiPipeline::Create(gallery_, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = PipelineOptions();
  o.top_k = 0;
  EXPECT_EQ(AlfiPipeline::Create(gallery_, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = PipelineOptions();
  o.host_slots = 1;
  EXPECT_EQ(AlfiPipeline::Create(gallery_, o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AlfiPipeline::Create(nullptr, PipelineOptions()).status().code(), absl::StatusCode::kInvalidArgument);
  auto broken = std::make_shared<MccGallery>(*gallery_);
  broken->x.pop_back();
  EXPECT_EQ(AlfiPipeline::Create(broken, PipelineOptions()).status().code(), absl::StatusCode::kInvalidArgument);
  if (!DeviceRegistry::Get().cuda_available()) {
    o = PipelineOptions();
    o.backend = Backend::kCuda;
    EXPECT_EQ(AlfiPipeline::Create(gallery_, o).status().code(), absl::StatusCode::kFailedPrecondition);
  }
  auto p = AlfiPipeline::Create(gallery_, PipelineOptions());
  ASSERT_TRUE(p.ok());
  MccTemplate huge;
  huge.cylinders.resize(kMccMaxMinutiae + 1);
  LssBatchMatcher matcher;
  EXPECT_EQ((*p)->Search(matcher, {huge}).status().code(), absl::StatusCode::kInvalidArgument);
}

// A matcher whose final stage fails on one batch: the search reports it.
class FailingMatcher : public LssBatchMatcher {
 public:
  absl::Status FinalStage(const GalleryBatch& batch, int latent, const void* out, int begin, int end,
                          float* scores) const override {
    if (batch.index == 2) return absl::DataLossError("batch 2 is broken");
    return LssBatchMatcher::FinalStage(batch, latent, out, begin, end, scores);
  }
};

TEST_F(AlfiPipelineCpu, FinalStageErrorsPropagate) {
  for (bool overlap : {true, false}) {
    PipelineOptions o;
    o.batch_templates = 10;
    o.overlap = overlap;
    auto p = AlfiPipeline::Create(gallery_, o);
    ASSERT_TRUE(p.ok());
    FailingMatcher matcher;
    auto got = (*p)->Search(matcher, latents_);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss) << got.status();
  }
}

// A matcher whose compute and final stage each take 30 ms per batch (sleeps,
// so the timing does not depend on free cores): with overlap the final stage
// of batch k runs while batch k+1 is computed.
class SlowMatcher : public LssBatchMatcher {
 public:
  absl::Status ComputeOnCpu(const MccGallery& gallery, const GalleryBatch& batch, void* out, size_t stride,
                            int threads, StopPoller* stop) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    return LssBatchMatcher::ComputeOnCpu(gallery, batch, out, stride, threads, stop);
  }
  absl::Status FinalStage(const GalleryBatch& batch, int latent, const void* out, int begin, int end,
                          float* scores) const override {
    if (latent == 0 && begin == 0) std::this_thread::sleep_for(std::chrono::milliseconds(30));
    return LssBatchMatcher::FinalStage(batch, latent, out, begin, end, scores);
  }
};

TEST_F(AlfiPipelineCpu, FinalStageOverlapsTheNextBatch) {
  double wall[2] = {0, 0};
  PipelineStats stats[2];
  for (int overlap = 0; overlap < 2; ++overlap) {
    PipelineOptions o;
    o.batch_templates = 18;  // 8 batches
    o.overlap = overlap == 1;
    auto p = AlfiPipeline::Create(gallery_, o);
    ASSERT_TRUE(p.ok());
    ASSERT_EQ((*p)->num_batches(), 8);
    SlowMatcher matcher;
    auto got = (*p)->Search(matcher, {latents_[0]}, &stats[overlap]);
    ASSERT_TRUE(got.ok()) << got.status();
    wall[overlap] = stats[overlap].wall_seconds;
  }
  std::printf("serial %.3f s (overlap ratio %.2f), pipelined %.3f s (overlap ratio %.2f)\n", wall[0],
              stats[0].overlap_ratio(), wall[1], stats[1].overlap_ratio());
  // Serial: 8 x (30 + 30) ms; pipelined: about 8 x 30 + 30 ms.
  EXPECT_GT(wall[0], 0.45);
  EXPECT_LT(wall[1], 0.8 * wall[0]);
  EXPECT_GT(stats[1].overlap_ratio(), 1.3);
  EXPECT_LT(stats[0].overlap_ratio(), 1.1);
}

// Counts CPU batches and cancels the search once the first one is computed.
class CancellingMatcher : public LssBatchMatcher {
 public:
  explicit CancellingMatcher(std::atomic<bool>* cancel) : cancel_(cancel) {}
  absl::Status ComputeOnCpu(const MccGallery& gallery, const GalleryBatch& batch, void* out, size_t stride,
                            int threads, StopPoller* stop) override {
    ++batches;
    absl::Status s = LssBatchMatcher::ComputeOnCpu(gallery, batch, out, stride, threads, stop);
    *cancel_ = true;
    return s;
  }
  int batches = 0;

 private:
  std::atomic<bool>* cancel_;
};

TEST_F(AlfiPipelineCpu, StopsBetweenBatchesWhenCancelled) {
  for (bool overlap : {true, false}) {
    PipelineOptions o;
    o.batch_templates = 10;  // 14 batches
    o.overlap = overlap;
    auto p = AlfiPipeline::Create(gallery_, o);
    ASSERT_TRUE(p.ok());
    std::atomic<bool> cancel{false};
    SearchControl control;
    control.check = CancelFlagCheck(&cancel);
    StopPoller stop(&control);
    PipelineSearchOptions search;
    search.stop = &stop;
    CancellingMatcher matcher(&cancel);
    auto got = (*p)->Search(matcher, latents_, search);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kCancelled) << got.status();
    EXPECT_EQ(matcher.batches, 1) << "overlap " << overlap;
    // The pipeline is usable again afterwards.
    LssBatchMatcher plain;
    EXPECT_TRUE((*p)->Search(plain, latents_).ok());
  }
}

TEST_F(AlfiPipelineCpu, ExcludedTemplatesAndPerCallTopK) {
  std::vector<uint8_t> exclude(gallery_->num_templates(), 0);
  for (int t = 0; t < gallery_->num_templates(); t += 4) exclude[t] = 1;  // latents 0 and 100 find no self
  const auto all = BruteForce(*gallery_, latents_, MccScore::kLssR, gallery_->num_templates());
  PipelineOptions o;
  o.batch_templates = 16;
  o.top_k = 3;
  auto p = AlfiPipeline::Create(gallery_, o);
  ASSERT_TRUE(p.ok());
  PipelineSearchOptions search;
  search.top_k = 12;
  search.exclude = exclude.data();
  LssBatchMatcher matcher;
  auto got = (*p)->Search(matcher, latents_, search);
  ASSERT_TRUE(got.ok()) << got.status();
  for (size_t l = 0; l < latents_.size(); ++l) {
    std::vector<Candidate> want;
    for (const Candidate& c : all[l]) {
      if (!exclude[c.template_index] && want.size() < 12) want.push_back(c);
    }
    EXPECT_EQ((*got)[l], want) << "latent " << l;
  }
}

// Counts the pruned outputs it passes on (kLssPrunedScore).
class CountingLssMatcher : public LssBatchMatcher {
 public:
  using LssBatchMatcher::LssBatchMatcher;
  absl::Status FinalStage(const GalleryBatch& batch, int latent, const void* out, int begin, int end,
                          float* scores) const override {
    absl::Status s = LssBatchMatcher::FinalStage(batch, latent, out, begin, end, scores);
    for (int i = 0; i < end - begin; ++i) pruned += scores[i] == kLssPrunedScore;
    return s;
  }
  mutable std::atomic<int> pruned{0};
};

// Pruning by the running k-th best changes no top-k list: duplicated
// templates (exact ties in score), exclusions, small k and small batches
// (the threshold rises often), against the unpruned matcher.
TEST_F(AlfiPipelineCpu, PruningKeepsTopKListsWithTiesAndExclusions) {
  auto templates = templates_;
  for (int i = 0; i < 80; i += 3) templates.push_back(templates_[i]);  // ties
  auto gallery = MakeGallery(templates);
  std::vector<MccTemplate> latents = latents_;
  for (int i = 1; i < 80; i += 13) latents.push_back(templates_[i]);
  std::vector<uint8_t> exclude(gallery->num_templates(), 0);
  for (int t = 5; t < gallery->num_templates(); t += 7) exclude[t] = 1;
  int pruned = 0;
  for (int k : {1, 5, 20}) {
    for (bool use_exclude : {false, true}) {
      PipelineOptions o;
      o.batch_templates = 16;
      o.threads = 2;
      auto p = AlfiPipeline::Create(gallery, o);
      ASSERT_TRUE(p.ok()) << p.status();
      PipelineSearchOptions search;
      search.top_k = k;
      search.exclude = use_exclude ? exclude.data() : nullptr;
      LssBatchMatcher plain(MccScore::kLssR, LssParams(), MccParams(), cuda::LssCudaKernel::kBlock, /*prune=*/false);
      CountingLssMatcher pruning(MccScore::kLssR);
      auto want = (*p)->Search(plain, latents, search);
      auto got = (*p)->Search(pruning, latents, search);
      ASSERT_TRUE(want.ok() && got.ok());
      for (size_t l = 0; l < latents.size(); ++l) {
        EXPECT_EQ((*got)[l], (*want)[l]) << "k " << k << " exclude " << use_exclude << " latent " << l;
      }
      pruned += pruning.pruned.load();
    }
  }
  std::printf("%d comparisons pruned\n", pruned);
  EXPECT_GT(pruned, 0);
}

TEST(TopK, OrdersByScoreThenIndex) {
  const float s[] = {0.5f, 0.9f, 0.5f, 0.1f, 0.9f};
  auto t = TopK(s, 5, 3, 100);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0].template_index, 101);
  EXPECT_EQ(t[1].template_index, 104);
  EXPECT_EQ(t[2].template_index, 100);
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
