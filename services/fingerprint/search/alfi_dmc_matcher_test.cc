// DMC through the ALFI pipeline (CPU backend): the top-k per latent must
// equal the top-k of DmcMatcher::ScoreGallery over the whole gallery for
// any batching.
#include "services/fingerprint/search/alfi_dmc_matcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/fingerprint/mcc.h"
#include "kernels/fingerprint/test_templates.h"
#include "services/fingerprint/search/alfi_pipeline.h"
#include "services/fingerprint/search/dmc_matcher.h"
#include "services/fingerprint/search/testing/dmc_reference.h"

namespace tessera {
namespace fingerprint {
namespace {

TEST(AlfiDmcMatcher, TopKEqualsWholeGalleryDmc) {
  auto pts = alfi_testing::RealAndSyntheticTemplates({2}, 80, /*db_seed=*/19, 23, 22);
  pts.push_back({});
  auto gallery = std::make_shared<MccGallery>();
  std::vector<MccTemplate> templates;
  for (const auto& p : pts) {
    templates.push_back(cpu::BuildMccTemplate(p));
    gallery->Append(templates.back());
  }
  // Latents: partial templates (the first 18 minutiae) and a whole one.
  std::vector<MccTemplate> latents;
  for (int i : {4, 30, 77}) latents.push_back(alfi_testing::PartialLatent(pts[i], 18));
  latents.push_back(templates[50]);
  const DmcMatcherOptions options;
  const int k = 12;
  auto expected = alfi_testing::WholeGalleryDmcTopK(options, latents, *gallery, k);
  ASSERT_TRUE(expected.ok()) << expected.status();
  for (int batch : {1, 17, 500}) {
    PipelineOptions o;
    o.batch_templates = batch;
    o.top_k = k;
    o.threads = 2;
    PipelineStats stats;
    auto got = alfi_testing::DmcPipelineSearch(gallery, o, options, latents, &stats);
    ASSERT_TRUE(got.ok()) << got.status();
    alfi_testing::ExpectSameTopK(*got, *expected, absl::StrCat("batch ", batch));
    EXPECT_GT(stats.final_stage_seconds, 0);
  }
  // The whole template finds itself first.
  EXPECT_EQ((*expected)[3][0].template_index, 50);
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
