// DMC through the ALFI pipeline (CPU backend): the top-k per latent must
// equal the top-k of DmcMatcher::ScoreGallery over the whole gallery for
// any batching.
#include "services/fingerprint/search/alfi_dmc_matcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/search/alfi_pipeline.h"
#include "services/fingerprint/search/dmc_matcher.h"

namespace tessera {
namespace fingerprint {
namespace {

TEST(AlfiDmcMatcher, TopKEqualsWholeGalleryDmc) {
  auto pts = testing::TestTemplates(2, 80, 21);
  auto extra = testing::SyntheticTemplates(23, 22);
  pts.insert(pts.end(), extra.begin(), extra.end());
  pts.push_back({});
  auto gallery = std::make_shared<MccGallery>();
  std::vector<MccTemplate> templates;
  for (const auto& p : pts) {
    templates.push_back(cpu::BuildMccTemplate(p));
    gallery->Append(templates.back());
  }
  // Latents: partial templates (the first 18 minutiae) and a whole one.
  std::vector<MccTemplate> latents;
  for (int i : {4, 30, 77}) {
    std::vector<MinutiaPoint> part(pts[i].begin(), pts[i].begin() + std::min<size_t>(18, pts[i].size()));
    latents.push_back(cpu::BuildMccTemplate(part));
  }
  latents.push_back(templates[50]);
  const DmcMatcherOptions options;
  auto reference = DmcMatcher::Create(options);
  ASSERT_TRUE(reference.ok()) << reference.status();
  const int k = 12;
  std::vector<std::vector<Candidate>> expected;
  for (const MccTemplate& l : latents) {
    auto scores = reference->ScoreGallery(Stream::Cpu(), l, *gallery);
    ASSERT_TRUE(scores.ok()) << scores.status();
    expected.push_back(TopK(scores->data(), gallery->num_templates(), k));
  }
  for (int batch : {1, 17, 500}) {
    PipelineOptions o;
    o.batch_templates = batch;
    o.top_k = k;
    o.threads = 2;
    auto p = AlfiPipeline::Create(gallery, o);
    ASSERT_TRUE(p.ok()) << p.status();
    auto matcher = DmcBatchMatcher::Create(options);
    ASSERT_TRUE(matcher.ok()) << matcher.status();
    PipelineStats stats;
    auto got = (*p)->Search(**matcher, latents, &stats);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), latents.size());
    for (size_t l = 0; l < latents.size(); ++l) {
      ASSERT_EQ((*got)[l].size(), expected[l].size());
      for (size_t r = 0; r < expected[l].size(); ++r) {
        EXPECT_EQ((*got)[l][r].template_index, expected[l][r].template_index) << "batch " << batch << " latent " << l;
        EXPECT_EQ((*got)[l][r].score, expected[l][r].score);
      }
    }
    EXPECT_GT(stats.final_stage_seconds, 0);
  }
  // The whole template finds itself first.
  EXPECT_EQ(expected[3][0].template_index, 50);
}

TEST(AlfiDmcMatcher, BadParameters) {
  DmcMatcherOptions o;
  o.final_stage.tps_min_pairs = 1;
  EXPECT_EQ(DmcBatchMatcher::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = DmcMatcherOptions();
  o.kernels.cluster_distance = -1;
  EXPECT_FALSE(DmcBatchMatcher::Create(o).ok());
}

}  // namespace
}  // namespace fingerprint
}  // namespace tessera
